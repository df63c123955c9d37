#pragma once
// ferry orchestrator: the host role of the DOCA remote-offload system. It creates
// the arena, hands it to the server over the control link, runs the workers,
// watches them and the server, and shuts down by the reference's protocol.

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/core/peer_policy.h"
#include "ferry/worker/backend.h"

namespace ferry::offload {

struct OrchestratorOptions {
  std::string device_id;     // DOCA: the host's comch device; accepted, unused without DOCA
  std::string gpu_pci_addr;  // CUDA backend: the GPU (PCI address or index)
  std::string channel_name = "dpu_gpu_remote_offload";
  std::uint32_t num_gpu_threads = 1;  // workers: must equal the server's number of --cpu cores
  std::uint32_t max_concurrent_messages = 128;
  std::uint32_t max_message_length = 256;
  std::uint32_t ring_slots = 0;  // slots per ring; 0 = 8 x max_concurrent_messages
  worker::WorkerOptions worker;  // what the backend was made with (its kind sizes the arena)
  double connect_timeout_s = 0;     // 0: wait for the server forever
  double hang_timeout_s = 5.0;      // no progress while requests wait this long = hung worker
  double shutdown_timeout_s = 5.0;  // wait this long for the server's shutdown_complete
  std::string ready_file;           // written once attached and serving (for scripts and ferry demo)
  PeerPolicy server_peers;          // whose server besides our own uid's may receive the arena
};

// Serves the arena's channels with `backend` (made for the caller's handler:
// worker::make_cpu_backend, worker::make_cuda_backend) until a signal or the
// server's start_shutdown. Returns the process exit code.
int run_orchestrator(const OrchestratorOptions& opts, std::unique_ptr<worker::Backend> backend);

}  // namespace ferry::offload
