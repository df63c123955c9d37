// ferry-kv-bench: pushes and pulls through a running `ferry agent` at several
// block sizes, beside the application's own copies in the same run
// (docs/bench/xfer.md). A program of its own, so that the ferry binary carries
// no benchmark code; installed beside it, so that a user can measure their own
// machine.

#include <CLI/CLI.hpp>

#include <cstdio>

#include "bench/kv/kv_bench.h"
#include "core/log.h"
#include "ferry/core/status.h"

int main(int argc, char** argv) {
  ferry::xfer::KvBenchOptions b;
  int log_level = 50;      // INFO, as ferry's subcommands
  int sdk_log_level = 40;  // WARNING
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
  app.add_option("--json-out", b.json_out, "Where to write the JSON results")->capture_default_str();
  app.add_option("-l,--log-level", log_level,
                 "Log level: 10 DISABLE, 20 CRITICAL, 30 ERROR, 40 WARNING, 50 INFO, 60 DEBUG, 70 TRACE")
      ->check(CLI::IsMember({10, 20, 30, 40, 50, 60, 70}))
      ->capture_default_str();
  app.add_option("--sdk-log-level", sdk_log_level,
                 "Log level of Ferry's OS, socket and CUDA plumbing, same scale")
      ->check(CLI::IsMember({10, 20, 30, 40, 50, 60, 70}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    ferry::log::init("kv", log_level, sdk_log_level);
    return ferry::xfer::kv_bench(b);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-kv-bench: %s\n", e.what());
    return 1;
  }
}
