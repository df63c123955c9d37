// ferry-kv-bench: pushes and pulls through a running `ferry agent` at several
// block sizes, beside the application's own copies in the same run
// (docs/bench/xfer.md). A program of its own, so that the ferry binary carries
// no benchmark code; installed beside it, so that a user can measure their own
// machine.

#include <CLI/CLI.hpp>

#include "bench/bench_main.h"
#include "bench/kv/kv_bench.h"

int main(int argc, char** argv) {
  ferry::xfer::KvBenchOptions b;
  ferry::bench::LogLevels levels;
  CLI::App app{
      "ferry-kv-bench: push and pull through a running 'ferry agent' at several block sizes "
      "(nixlbench's columns), beside the copy baselines (cudaMemcpyAsync loop, cudaMemcpyBatchAsync; "
      "memcpy without a GPU) in the same run; prints a table and writes JSON."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--endpoint", b.endpoint, "The agent: unix:NAME or tcp:HOST:PORT")->capture_default_str();
  app.add_option("--block-sizes", b.block_sizes, "Block sizes in bytes")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--total-bytes", b.total_bytes, "Bytes moved per block size and direction")
      ->capture_default_str();
  app.add_option("--batch-bytes", b.batch_bytes, "Bytes per transfer request (batch = this / block size)")
      ->capture_default_str();
  app.add_option("--mem", b.mem, "Application memory: vram or dram")
      ->check(CLI::IsMember({"vram", "dram"}))
      ->capture_default_str();
  app.add_flag("!--no-baselines", b.baselines, "Skip the copy baselines");
  app.add_option(
         "--baseline-streams", b.baseline_streams,
         "Streams (a feeding thread each) for the cudaMemcpyAsync baseline over several streams; 1 skips it")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--json-out", b.json_out, "Where to write the JSON results")->capture_default_str();
  ferry::bench::add_log_level_flags(app, levels);
  CLI11_PARSE(app, argc, argv);
  return ferry::bench::run_bench("ferry-kv-bench", "kv", levels, [&] { return ferry::xfer::kv_bench(b); });
}
