// The launch benchmark's GPU probes in a build without CUDA: nothing to measure.
#include "bench/launch/gpu_probes.h"

namespace ferry::bench {

std::optional<FloorResult> measure_floor(const std::string&, std::uint64_t, PingPongOrder) {
  return std::nullopt;
}
std::optional<MinimalMechanisms> measure_minimal_mechanisms(const std::string&, std::uint64_t) {
  return std::nullopt;
}
std::optional<HandlerThroughput> measure_handler_throughput(const std::string&) { return std::nullopt; }
std::optional<ServeSteps> measure_serve_steps(const std::string&, std::uint64_t) {
  return std::nullopt;
}
std::optional<BatchedSteps> measure_batched_steps(const std::string&, std::uint64_t) {
  return std::nullopt;
}
std::string gpu_name(const std::string&) { return ""; }

}  // namespace ferry::bench
