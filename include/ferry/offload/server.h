#pragma once
// ferry server: the proxy role of the DOCA remote-offload system. It accepts TCP
// clients, forwards their requests into the arena's channels, and sends the
// workers' responses back, in order per connection.

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/peer_policy.h"

namespace ferry::offload {

struct ServerOptions {
  std::string device_id;       // DOCA: the DPU's device; accepted, unused without DOCA
  std::string representor_id;  // DOCA: the host representor; accepted, unused without DOCA
  std::string channel_name = "dpu_gpu_remote_offload";
  std::string listen_address = "0.0.0.0";
  std::uint16_t port = 0;
  std::vector<int> cpus;  // one pinned data-path thread per core
  std::uint32_t max_concurrent_messages = 128;  // per connection in flight
  std::uint32_t max_message_length = 256;       // excludes the 8-byte header
  std::uint32_t max_clients_per_thread = 1024;
  std::string port_file;               // write the bound port here once listening
  double shutdown_timeout_s = 5.0;     // how long to drain and to wait for the peer
  // Requests in a channel that get no response for this long mean a frozen or
  // deadlocked orchestrator: it is detached and those clients get no_workers.
  // 0: wait forever.
  double request_timeout_s = 30.0;
  PeerPolicy control_peers;  // who besides our own uid may attach as the orchestrator
  bool pin_threads = true;
};

// Runs until Ctrl-C/SIGTERM or the orchestrator's start_shutdown. Returns the
// process exit code.
int run_server(const ServerOptions& opts);

}  // namespace ferry::offload
