#pragma once
// ferry orchestrator: the host role of the DOCA remote-offload system. It creates
// the arena, hands it to the server over the control link, runs the workers,
// watches them and the server, and shuts down by the reference's protocol.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
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
  // Serve GET /metrics (Prometheus text) and GET /health on this TCP port of
  // metrics_address, from a thread of its own (README.md, "Metrics").
  // Unset: no endpoint; 0: a free port (metrics_port() says which).
  std::optional<std::uint16_t> metrics_port;
  std::string metrics_address = "127.0.0.1";
};

// The host role as a service an application hosts. It serves the arena's
// channels with `backend`, made for the application's handler
// (worker::make_cpu_backend, worker::make_cuda_backend):
//
//   Orchestrator orch(options, worker::make_cpu_backend(options.worker, MyHandler{}));
//   orch.start();            // arena made and registered; connects in the background
//   ...
//   orch.stop();             // start_shutdown to the server
//   int code = orch.wait();  // 0, or 1 after an error (first_error() says which)
//
// It stops by itself when the server shuts down or goes away, when a worker
// fails, or when the workers make no progress for hang_timeout_s while requests
// wait. It handles no signals.
class Orchestrator {
 public:
  Orchestrator(OrchestratorOptions options, std::unique_ptr<worker::Backend> backend);  // throws ferry::Error
  ~Orchestrator();
  Orchestrator(const Orchestrator&) = delete;
  Orchestrator& operator=(const Orchestrator&) = delete;

  // Creates the arena and prepares the backend (throws ferry::Error), then
  // connects to the server, attaches and serves, on a thread of its own.
  void start();
  void stop() noexcept;
  int wait();
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  std::uint64_t handled() const;  // messages answered so far
  // The metrics endpoint's port once started; 0 without one.
  std::uint16_t metrics_port() const noexcept;
  // True when the workers could not be stopped (a hung kernel or handler). The
  // GPU context then cannot be torn down: the process should _exit().
  bool stuck() const;
  std::string first_error() const;  // sticky; empty while healthy

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::offload
