#pragma once
// One pipeline of ferry l2fwd: RX queue q and TX queue q of a port, the RX and
// TX loops that run on their lcores, and the communication list between them
// and the worker (ferry/packet/l2fwd.h has the picture).

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/latency_histogram.h"
#include "ferry/core/comm_list.h"
#include "ferry/packet/l2fwd.h"
#include "packet_pool.h"

namespace ferry::packet {

// What RX and TX tell the rest, as relaxed counters each written by one loop.
struct PipelineCounters {
  std::atomic<std::uint64_t> rx_packets{0}, rx_bytes{0};
  std::atomic<std::uint64_t> tx_packets{0}, tx_bytes{0};
  std::atomic<std::uint64_t> dropped_full{0}, dropped_tx{0}, dropped_segmented{0};
  std::atomic<std::uint64_t> bursts{0};

  PipelineStats snapshot() const;
};

// Shared by every pipeline: how many packets may still be admitted. The
// warm-up is a phase of its own: RX admits warmup packets, then waits until
// the control thread has seen them all sent and opens the measured phase.
struct AdmissionLimit {
  std::atomic<std::uint64_t> limit{0};  // 0: no limit
  std::atomic<bool> final_phase{true};  // false during the warm-up
  std::atomic<std::uint64_t> admitted{0};
  // Reserves up to `want` packets; how many were granted.
  std::uint32_t reserve(std::uint32_t want);
  bool reached() const {
    const std::uint64_t l = limit.load(std::memory_order_acquire);
    return l != 0 && admitted.load(std::memory_order_relaxed) == l;
  }
  // Gives back what was reserved and not received.
  void give_back(std::uint32_t n) { admitted.fetch_sub(n, std::memory_order_relaxed); }
  bool exhausted() const {
    const std::uint64_t l = limit.load(std::memory_order_acquire);
    return l != 0 && admitted.load(std::memory_order_relaxed) >= l;
  }
};

class Pipeline {
 public:
  Pipeline(std::uint32_t index, const L2fwdOptions& options, CommList list, const PacketPool& pool,
           AdmissionLimit& limit);

  // The loops, each on its own lcore. RX returns once stop_rx() is called or the
  // limit is reached; TX once RX has ended and every burst it filled is sent,
  // or its next item is ERROR.
  int rx_loop();
  int tx_loop();

  void stop_rx() { stop_rx_.store(true, std::memory_order_relaxed); }
  // The drain timed out: TX stops retrying a port that takes nothing.
  void abort_tx() { abort_tx_.store(true, std::memory_order_relaxed); }
  bool rx_ended() const { return rx_ended_.load(std::memory_order_acquire); }
  // RX waits at the end of the warm-up and TX has sent everything it filled.
  bool warmed_up() const {
    return rx_paused_.load(std::memory_order_acquire) &&
           tx_next_.load(std::memory_order_acquire) == rx_next_.load(std::memory_order_acquire);
  }
  // Marks every item ERROR: ends a worker (and a TX loop) waiting on one.
  void mark_error();
  // After every loop and the worker have stopped: frees the mbufs of bursts
  // that were filled and never sent, counting them as dropped_tx.
  void free_unsent();

  const PipelineCounters& counters() const { return counters_; }
  // Per-burst latency since the last call.
  void take_latency(LatencyHistogram& interval);
  std::uint16_t rx_lcore = 0, tx_lcore = 0;

 private:
  std::uint32_t gather(rte_mbuf** mbufs, std::uint32_t want);
  void publish_latency(LatencyHistogram& pending);

  std::uint32_t index_;
  const L2fwdOptions& options_;
  CommList list_;
  const PacketPool& pool_;
  AdmissionLimit& limit_;
  std::vector<rte_mbuf*> mbufs_;  // item k's mbufs at [k * max_packets, ...), host-only
  PipelineCounters counters_;
  std::atomic<bool> stop_rx_{false};
  std::atomic<bool> rx_ended_{false};
  std::atomic<bool> abort_tx_{false};
  std::atomic<bool> rx_paused_{false};  // RX waits for the measured phase
  std::atomic<std::uint32_t> rx_next_{0};  // items RX has filled (its index), for TX's drain
  std::atomic<std::uint32_t> tx_next_{0};  // items TX has finished
  std::mutex latency_mutex_;
  LatencyHistogram latency_interval_;  // TX hands its samples over here, under the mutex, every 64 bursts
};

}  // namespace ferry::packet
