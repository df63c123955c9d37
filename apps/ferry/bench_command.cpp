#include "bench/launch/launch_bench.h"
#include "commands.h"

namespace ferry::app {

void register_bench(CLI::App& app, GeneralFlags& general, Command& command) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks that need no network: see 'ferry bench launch --help'");
  bench->require_subcommand(1);
  static bench::LaunchBenchOptions o;
  CLI::App* launch = bench->add_subcommand(
      "launch",
      "The CPU/GPU launch methods against each other and the hardware floor: CPU producer threads write "
      "straight into the channels (no TCP); prints a table and writes JSON.");
  add_general_flags(*launch, general);
  launch->add_option("--methods", o.methods, "Methods to run (cpu, persistent, burst, graph, memops)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::IsMember({"cpu", "persistent", "burst", "graph", "memops"}));
  launch->add_option("--sizes", o.sizes, "Message sizes in bytes")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  launch->add_option("--bursts", o.bursts, "Messages each producer posts at once")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  launch->add_option("--channels", o.channels, "Channels, one producer thread each")->capture_default_str();
  launch->add_option("--seconds", o.seconds_per_point, "Seconds per throughput point")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  launch->add_option("--round-trips", o.latency_round_trips, "Round trips in each latency measurement")
      ->capture_default_str();
  launch->add_option("-g,--gpu-pci-addr", o.gpu, "GPU: PCI address or device index");
  launch->add_option("--idle-sleep-max-us", o.idle_sleep_max_us,
                     "persistent: longest sleep between polls of a channel idle for 5 ms")
      ->check(duration_check("microseconds"))
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  launch->add_option("--json-out", o.json_out, "Where to write the JSON results")->capture_default_str();
  launch->callback([&command] {
    command.role = "bench";
    command.run = [] { return bench::run_launch_bench(o); };
  });
}

}  // namespace ferry::app
