#pragma once
// `ferry agent`: the DMA proxy of the KV-cache offload system
// (docs/architecture.md, docs/xfer.md). It serves applications over a Unix socket or TCP, opens
// the memory they export, and moves it through its staging buffer into a chain
// of storage tiers.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/core/peer_policy.h"

namespace ferry::xfer {

// How the agent copies between application GPU memory and its staging buffer:
// Auto (the kernel below kernel_below bytes, Batch at and above), Batch
// (cudaMemcpyBatchAsync), Loop (cudaMemcpyAsync per block) or Kernel (a
// gather/scatter kernel that also computes the checksums on the GPU).
enum class CopyMode { Auto, Batch, Loop, Kernel };

inline constexpr int kGpuAuto = -1;  // the first CUDA device if there is one, else none
inline constexpr int kGpuNone = -2;  // memcpy threads only

struct AgentServiceOptions {
  std::string endpoint = "unix:ferry.agent";  // "unix:NAME" or "tcp:HOST:PORT"
  std::vector<std::string> tiers;             // "dram:8GiB", "file:/var/lib/ferry", "redis://127.0.0.1:6379"
  std::size_t staging_mib = 256;
  std::size_t chunk_kib = 0;      // a batch's bytes; 0: 16 MiB, or a staging slot if that is smaller
  std::size_t chunk_blocks = 128;  // ... and its blocks, whichever limit comes first
  int queue_depth = 8;
  int gpu = kGpuAuto;  // kGpuAuto, kGpuNone, or a CUDA device index
  CopyMode copy = CopyMode::Auto;
  // CopyMode::Auto's threshold for pushes, bytes. Since the kernel folds XXH3
  // with a thread per accumulator, it matches or beats the copy engines plus
  // the CPU's hash at every block size measured (docs/bench/xfer.md), so auto
  // takes it up to the largest blocks.
  std::size_t kernel_below = 64u << 20;
  std::size_t kernel_below_pull = 64u << 20;  // ... and for pulls
  // CopyMode::Auto: blocks of at least this size (below kernel_below) are copied
  // by the copy engines, and the kernel only hashes them in device memory (0:
  // never). The engines move large blocks faster than the kernel's SM loads.
  std::size_t engines_from = 1u << 20;
  // Pin the agent to these cores (empty: no pinning). start() pins the calling
  // thread, so that every thread the agent starts inherits the set.
  std::vector<int> cpus;
  // How long an idle copy lane polls for work before it sleeps, µs; -1: 200 when
  // the agent has its own cores (cpus), else 0 (never poll a shared core).
  int lane_spin_us = -1;
  std::string ready_file;     // written with the endpoint once the agent accepts applications

  // Who may connect (docs/security.md): the agent's own uid, plus these.
  PeerPolicy peers;
  // One key space shared by every admitted uid, instead of one per uid.
  bool shared_namespace = false;
  std::size_t max_sessions = 256;
  // What one session may hold in the agent: requests in flight plus unread replies.
  std::size_t max_session_mib = 256;
  std::size_t max_regions = 1024;  // registered regions per session
  // A session that leaves a frame half sent, or its replies unread, this long is cut off.
  double stall_timeout_s = 30;
  // How long the application's own memory (reached by copy calls) may keep
  // the agent waiting: a registration's probe, or a batch of copies, before
  // the call is answered with an error (and the memory dropped). The event
  // loop never waits on such memory.
  double memory_timeout_s = 10;

  // Serve GET /metrics (Prometheus text) and GET /health on this TCP port of
  // metrics_address, from a thread of its own (docs/xfer.md, "Metrics").
  // Unset: no endpoint; 0: a free port (metrics_port() says which).
  std::optional<std::uint16_t> metrics_port;
  std::string metrics_address = "127.0.0.1";
};

// The agent as a service an application hosts:
//
//   AgentService agent(options);  // checks the options; throws ferry::Error
//   agent.start();                // tiers opened, listening; throws ferry::Error
//   ...
//   agent.stop();
//   int code = agent.wait();
//
// It handles no signals.
class AgentService {
 public:
  explicit AgentService(AgentServiceOptions options);
  ~AgentService();  // stops and waits
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  void start();
  // The endpoint as bound ("tcp:127.0.0.1:40000" for a requested port 0).
  std::string endpoint() const;
  // The metrics endpoint's port once started; 0 without one.
  std::uint16_t metrics_port() const noexcept;
  // Closes every session and finishes what the copy threads hold; any thread.
  void stop() noexcept;
  int wait();
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // Bytes and objects moved, per-tier use, refused and failed requests: JSON.
  std::string stats_json() const;
  std::string first_error() const;  // sticky; empty while healthy

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::xfer
