#pragma once
// ferry-launch-bench: the launch methods against each other and against the
// minimal mechanism under each, with no TCP. CPU producer threads write requests straight
// into the channels of an arena; the workers answer.

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::bench {

struct LaunchBenchOptions {
  std::vector<std::string> methods = {"cpu", "persistent", "burst", "graph", "memops"};
  std::vector<std::uint32_t> sizes = {64, 1024, 4096};
  std::vector<std::uint32_t> bursts = {1, 8, 16, 32, 64, 128, 256, 1024};
  std::uint32_t channels = 4;          // producer threads, one channel each
  double seconds_per_point = 0.25;
  std::uint64_t latency_round_trips = 20000;
  std::string gpu;
  std::uint32_t idle_sleep_max_us = 8;  // persistent: see WorkerOptions
  std::string json_out = "launch.json";
};

int run_launch_bench(const LaunchBenchOptions& opts);

}  // namespace ferry::bench
