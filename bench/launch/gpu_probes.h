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

std::optional<FloorResult> measure_floor(const std::string& gpu, std::uint64_t round_trips);
std::optional<HandlerThroughput> measure_handler_throughput(const std::string& gpu);
std::string gpu_name(const std::string& gpu);

}  // namespace ferry::bench
