#pragma once
// A worker backend runs a handler over every channel of an arena. The CPU backend
// uses threads (make_cpu_backend, cpu_backend.h); the CUDA backend uses the
// launch methods of docs/architecture (make_cuda_backend, cuda_backend.h).
// Either is made for a handler type of the caller's own (handlers.h).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/arena.h"

namespace ferry::worker {

enum class BackendKind { Cpu, Cuda };

enum class LaunchMethod { Cpu, Persistent, Burst, Graph, Memops };

struct WorkerOptions {
  BackendKind backend = BackendKind::Cpu;
  LaunchMethod launch = LaunchMethod::Cpu;
  std::vector<int> cpus;           // CPU backend: pin worker i to cpus[i % size]; empty = unpinned
  // CPU backend: worker threads; 0 = one per channel. Fewer threads than
  // channels each serve several channels in turn (channel c by thread c % threads).
  std::uint32_t threads = 0;
  std::string gpu;                 // CUDA backend: PCI address or device index; empty = device 0
  std::uint32_t burst = 32;        // burst/graph/memops: most requests per launch
  std::uint32_t burst_timeout_us = 20;
  // persistent: after about 5 ms without requests a channel's block sleeps
  // between polls, 0.5 us at first, doubling up to this. Longer sleeps cost a
  // long-idle channel's first request up to this much latency, and spare the
  // busy channels the idle ones' PCIe reads.
  std::uint32_t idle_sleep_max_us = 8;
};

// The launch methods on the GPU (all but Cpu): the same four on the request
// path (here) and the packet path (ferry/packet/packet_worker.h).
constexpr bool runs_on_gpu(LaunchMethod method) noexcept {
  return method != LaunchMethod::Cpu;
}

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

}  // namespace ferry::worker
