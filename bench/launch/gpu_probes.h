#pragma once
// GPU measurements of the launch benchmark that need kernels of their own: the
// hardware floor (a minimal persistent-kernel ping-pong through mapped host
// memory) and the handler's throughput on messages in device memory against the
// device's memory bandwidth. Empty results where the build has no CUDA.

#include <cstdint>
#include <optional>
#include <string>

namespace ferry::bench {

struct FloorResult {
  double p50_us = 0, p99_us = 0, min_us = 0;
  std::uint64_t round_trips = 0;
};

struct HandlerThroughput {
  std::uint32_t messages = 0;
  std::uint32_t message_bytes = 0;
  double device_copy_gbs = 0;    // cudaMemcpy device-to-device, bytes read + written per second
  double naive_gbs = 0;          // one thread per message, serial reverse
  double warp_gbs = 0;           // one warp per message, Ferry's cooperative Reverse
  bool verified = false;         // both kernels' output checked against the CPU
};

// The raw mechanisms under the batched launch methods, each as a round trip
// that a request could at best take through it: the host writes a word into
// mapped memory, a one-block kernel reads it and writes an answer, the host sees
// the answer. p50 in microseconds.
struct RawMechanisms {
  double launch_sync_us = 0;  // burst's: cudaLaunchKernel, then cudaStreamSynchronize
  double graph_sync_us = 0;   // graph's: cudaGraphLaunch of that kernel, then cudaStreamSynchronize
  double memops_us = 0;       // memops': a pre-posted cuStreamWaitValue32, the kernel, and
                              // cuStreamWriteValue32, released by a flag and seen by polling
};

std::optional<FloorResult> measure_floor(const std::string& gpu, std::uint64_t round_trips);
std::optional<RawMechanisms> measure_raw_mechanisms(const std::string& gpu, std::uint64_t round_trips);
std::optional<HandlerThroughput> measure_handler_throughput(const std::string& gpu);
std::string gpu_name(const std::string& gpu);

}  // namespace ferry::bench
