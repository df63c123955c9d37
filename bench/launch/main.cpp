// ferry-launch-bench: the CPU/GPU launch methods against each other and
// against the minimal mechanism under each (docs/bench/launch.md). A program
// of its own, so that the ferry binary carries no benchmark code; installed
// beside it, so that a user can measure their own machine.

#include <CLI/CLI.hpp>

#include "bench/bench_main.h"
#include "bench/launch/launch_bench.h"

int main(int argc, char** argv) {
  ferry::bench::LaunchBenchOptions o;
  ferry::bench::LogLevels levels;
  CLI::App app{
      "ferry-launch-bench: the CPU/GPU launch methods against each other and against the minimal "
      "mechanism under each. CPU producer threads write straight into the channels (no TCP); prints a "
      "table and writes JSON."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--methods", o.methods, "Methods to run (cpu, persistent, burst, graph, memops)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::IsMember({"cpu", "persistent", "burst", "graph", "memops"}));
  app.add_option("--sizes", o.sizes, "Message sizes in bytes")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Range(1u, 1u << 20));
  app.add_option("--bursts", o.bursts, "Messages each producer posts at once")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Range(1u, 1u << 16));
  app.add_option("--channels", o.channels, "Channels, one producer thread each")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--seconds", o.seconds_per_point, "Seconds per throughput point")
      ->check(ferry::bench::finite_range(0.001, 3600.0))
      ->capture_default_str();
  app.add_option("--round-trips", o.latency_round_trips, "Round trips in each latency measurement")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{100000000}))
      ->capture_default_str();
  app.add_option("-g,--gpu-pci-addr", o.gpu, "GPU: PCI address or device index");
  app.add_option("--idle-sleep-max-us", o.idle_sleep_max_us,
                 "persistent: longest sleep between polls of a channel idle for 5 ms")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  app.add_option("--json-out", o.json_out, "Where to write the JSON results")->capture_default_str();
  ferry::bench::add_log_level_flags(app, levels);
  CLI11_PARSE(app, argc, argv);
  return ferry::bench::run_bench("ferry-launch-bench", "bench", levels,
                                 [&] { return ferry::bench::run_launch_bench(o); });
}
