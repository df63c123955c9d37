#pragma once
// ferry l2fwd as a service an application hosts: the packet path of the DPDK
// gpudev article and NVIDIA's l2fwd-nv, on any DPDK port: every PMD Debian ships
// with a shared DPDK link, the virtual ones with a static one (cmake/dpdk.cmake,
// docs/packet.md).
//
// Each pipeline p owns RX queue p and TX queue p of one port, an RX core and a
// TX core (EAL worker lcores, in order), and a communication list
// (ferry/core/comm_list.h):
//   RX       receives a burst into packet memory, fills the next FREE item, marks it READY;
//   worker   (a PacketWorker: CPU or GPU, any launch method) handles the packets
//            in place and marks the item DONE;
//   TX       transmits the burst and marks the item FREE.
// When the list is full, RX drops what it receives (or, with FullPolicy::Wait,
// stops polling and leaves the drops to the port), counts them, and goes on.
//
//   ferry::packet::Eal eal({"ferry", "-l", "0-2", "--vdev", "net_null0"});
//   ferry::packet::L2fwd l2fwd(options, make_macswap_worker(options.worker));
//   l2fwd.start();            // sets up on the service's thread: bad options or a port it
//                             // cannot use end it, and wait()/first_error() say why
//   ...
//   l2fwd.stop();             // drains what is in flight, then tears down
//   int code = l2fwd.wait();  // 0, or 1 after an error (first_error() says which)

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/packet/packet_worker.h"

namespace ferry::packet {

// DPDK's Environment Abstraction Layer, once per process: initialised from
// DPDK's usual arguments (args[0] is the program name), cleaned up when it goes.
class Eal {
 public:
  // Throws ferry::Error with DPDK's reason when rte_eal_init fails, when an EAL
  // is already up in this process, or when a device named by --vdev, -a or
  // --allow made no port (its driver is missing, or refused its arguments; the
  // message says where this build's drivers come from).
  explicit Eal(const std::vector<std::string>& args);
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;
  // Worker lcores available to pipelines (two per pipeline).
  unsigned worker_lcores() const;
};

// A port the EAL probed, as `ferry l2fwd --list-ports` and the startup log show it.
struct PortInfo {
  std::uint16_t port = 0;
  std::string device;  // a vdev's name (net_null0) or a PCI address (0000:3b:00.0)
  std::string driver;  // the PMD: mlx5_pci, net_ice, net_af_packet, ...
  std::uint16_t max_rx_queues = 0, max_tx_queues = 0;
  std::uint64_t rss_hashes = 0;   // RTE_ETH_RSS_* the port can spread flows by
  std::uint64_t rx_offloads = 0;  // RTE_ETH_RX_OFFLOAD_* it can do
  std::uint64_t tx_offloads = 0;  // RTE_ETH_TX_OFFLOAD_* it can do
};

// Every port the EAL probed, in port order. The EAL must be up.
std::vector<PortInfo> list_ports();
// One line: port, device, driver, queue limits, RSS hashes and offloads by name.
std::string describe(const PortInfo& port);
// How this build links DPDK and where its drivers come from, for messages.
std::string dpdk_drivers_note();

enum class FullPolicy {
  Drop,  // receive and free: the drops are counted as dropped_full
  Wait,  // stop polling the queue: the port drops (imissed) where it must
};

struct L2fwdOptions {
  PacketWorkerOptions worker;          // mode, GPU, burst (max_packets), -t, graph_items
  MemoryKind memory = MemoryKind::Host;
  std::uint16_t port = 0;
  std::uint32_t pipelines = 1;
  std::uint32_t data_room = 2048;      // bytes per packet buffer after DPDK's headroom (l2fwd-nv's -d)
  std::uint32_t items = 64;            // communication list items per pipeline (a power of two)
  std::uint32_t mbufs = 0;             // per pipeline, at least the list's and the queues' worth; 0 = that and some to spare
  std::uint16_t rx_descriptors = 1024;
  std::uint16_t tx_descriptors = 1024;
  std::uint64_t packets = 0;           // l2fwd-nv's -v: stop after this many (after warm-up); 0 = run until stopped
  std::uint64_t warmup_packets = 0;    // l2fwd-nv's -z: forwarded, but not measured
  std::uint32_t burst_timeout_us = 100;  // a partial burst goes on after this long
  FullPolicy when_full = FullPolicy::Drop;
  std::chrono::milliseconds drain_timeout{2000};  // at stop, for bursts still in flight
};

struct PipelineStats {
  std::uint64_t rx_packets = 0, rx_bytes = 0;
  std::uint64_t tx_packets = 0, tx_bytes = 0;
  std::uint64_t dropped_full = 0;      // received while the list was full
  std::uint64_t dropped_tx = 0;        // the port would not take them before teardown
  std::uint64_t dropped_segmented = 0;  // multi-segment packets, which no worker can handle in place
  std::uint64_t bursts = 0;
  std::uint64_t latency_p50_ns = 0, latency_p99_ns = 0;  // READY to DONE seen by TX, per burst

  std::uint64_t dropped() const { return dropped_full + dropped_tx + dropped_segmented; }
};

struct PortStats {
  std::uint64_t imissed = 0, ierrors = 0, oerrors = 0, rx_nombuf = 0;
  // Times the packet pool was found with less than a burst free, so that RX
  // could receive nothing: whatever the driver, where rx_nombuf is only what
  // drivers that count it saw.
  std::uint64_t pool_dry = 0;
};

struct L2fwdReport {
  double seconds = 0;                  // the window these counts cover
  std::vector<PipelineStats> pipelines;
  PipelineStats total;
  PortStats port;
  std::int64_t mbufs_in_use = -1;      // after teardown: anything but 0 is a leak; -1 while running
};

class L2fwd {
 public:
  // `worker` may be null only with no launch method. The EAL must be up.
  L2fwd(const L2fwdOptions& options, std::unique_ptr<PacketWorker> worker);
  ~L2fwd();  // stops and waits
  L2fwd(const L2fwd&) = delete;
  L2fwd& operator=(const L2fwd&) = delete;

  void start();
  void stop();  // any thread, idempotent
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  int wait();
  std::string first_error() const;
  // The measured window (after warm-up) so far; after wait(), the whole run.
  L2fwdReport report() const;
  // The counts since the last call (the first call: since warm-up ended).
  L2fwdReport interval_report();
  // Whether the warm-up is over (or there was none).
  bool measuring() const;
  std::string describe() const;
  // The worker left GPU work running at teardown (PacketWorker::stuck()).
  bool stuck() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The report as l2fwd-nv prints its statistics: a line per pipeline and the total.
std::string format_report(const L2fwdReport& report, const std::string& title);
// The report as JSON (docs/packet.md names the fields).
std::string report_json(const L2fwdReport& report);

}  // namespace ferry::packet
