#pragma once
// `ferry agent`: the DMA proxy of the KV-cache offload system (ARCHITECTURE.md
// "Transfer engine"). It serves applications over a Unix socket or TCP, opens
// the memory they export, and moves it through its staging buffer into a chain
// of storage tiers.

#include <cstddef>
#include <string>
#include <vector>

#include "ferry/core/peer_policy.h"

namespace ferry::xfer {

struct AgentServiceOptions {
  std::string endpoint = "unix:ferry.agent";  // "unix:NAME" or "tcp:HOST:PORT"
  std::vector<std::string> tiers;             // "dram:8GiB", "file:/var/lib/ferry", "redis://127.0.0.1:6379"
  std::size_t staging_mib = 256;
  std::size_t chunk_kib = 0;      // a batch's bytes; 0: 16 MiB, or a staging slot if that is smaller
  std::size_t chunk_blocks = 128;  // ... and its blocks, whichever limit comes first
  int queue_depth = 8;
  std::string gpu = "auto";   // "auto", "none", or a device index
  // "auto" (the kernel below kernel_below bytes, batch at and above), "batch"
  // (cudaMemcpyBatchAsync), "loop" (cudaMemcpyAsync per block) or "kernel"
  std::string copy = "auto";
  // --copy auto's threshold for pushes (a size: "64MiB", "262144"). Since the
  // kernel folds XXH3 with a thread per accumulator, it matches or beats the copy
  // engines plus the CPU's hash at every block size measured on an H100 (16 KiB to
  // 32 MiB, docs/bench/xfer.md run 4), so auto takes it up to the largest blocks.
  std::string kernel_below = "64MiB";
  std::string kernel_below_pull = "64MiB";  // ... and for pulls
  // --copy auto: blocks of at least this size (below kernel_below) are copied by
  // the copy engines, and the kernel only hashes them in device memory ("0":
  // never). The engines move large blocks faster than the kernel's SM loads.
  std::string engines_from = "1MiB";
  std::vector<int> cpus;      // pin the agent to these cores (empty: no pinning)
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
};

// Runs until SIGINT/SIGTERM. Returns the process exit code; throws ferry::Error
// for bad options or an unusable tier at start-up.
int run_agent(const AgentServiceOptions& options);

}  // namespace ferry::xfer
