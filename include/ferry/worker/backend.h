#pragma once
// A worker backend runs a handler over every channel of an arena. The CPU backend
// uses threads; the CUDA backend (worker/cuda, built where nvcc is found) uses
// the launch methods of ARCHITECTURE.md.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/arena.h"
#include "ferry/worker/handlers.h"

namespace ferry::worker {

enum class BackendKind { Cpu, Cuda };

enum class LaunchMethod { Cpu, Persistent, Burst, Graph, Memops };

struct WorkerOptions {
  BackendKind backend = BackendKind::Cpu;
  LaunchMethod launch = LaunchMethod::Cpu;
  HandlerKind handler = HandlerKind::Reverse;
  std::vector<int> cpus;           // CPU backend: pin worker i to cpus[i % size]; empty = unpinned
  std::string gpu;                 // CUDA backend: PCI address or device index; empty = device 0
  std::uint32_t burst = 32;        // burst/graph/memops: most requests per launch
  std::uint32_t burst_timeout_us = 20;
  // persistent: after about 5 ms without requests a channel's block sleeps
  // between polls, 0.5 us at first, doubling up to this. Longer sleeps cost a
  // long-idle channel's first request up to this much latency, and spare the
  // busy channels the idle ones' PCIe reads.
  std::uint32_t idle_sleep_max_us = 8;
};

BackendKind parse_backend(std::string_view name);
LaunchMethod parse_launch(std::string_view name);
const char* to_string(BackendKind kind) noexcept;
const char* to_string(LaunchMethod method) noexcept;

// True when this build has the CUDA backend and a CUDA device is present.
bool cuda_available() noexcept;

class Backend {
 public:
  virtual ~Backend() = default;
  // Prepares device state for the arena (the CUDA backend registers it). Throws.
  virtual void prepare(Arena& arena) = 0;
  // Starts serving every channel of the arena. Throws.
  virtual void start() = 0;
  // Stops the workers and waits for them; idempotent.
  virtual void stop() = 0;
  // The first error a worker hit, or empty while healthy (sticky).
  virtual std::string failure() const = 0;
  // Messages answered so far, summed over channels (progress, for hang detection).
  virtual std::uint64_t handled() const = 0;
  virtual std::string describe() const = 0;
  // True when stop() had to leave workers running (a hung kernel or handler that
  // ignores the stop flag). The process must then exit without tearing down the
  // GPU context: cudaFree and context destruction wait for the kernel forever,
  // while process exit lets the driver reclaim it.
  virtual bool stuck() const { return false; }
};

// Throws ferry::Error when the backend is not available in this build/machine.
std::unique_ptr<Backend> make_backend(const WorkerOptions& options);

}  // namespace ferry::worker
