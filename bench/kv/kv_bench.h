#pragma once
// ferry-kv-bench: pushes and pulls through a running agent at several block
// sizes, beside the application's own cudaMemcpyAsync loop and
// cudaMemcpyBatchAsync copies (or memcpy) in the same run, with nixlbench's
// columns; prints a table and writes JSON. Benchmark code: never linked into
// Ferry's libraries or the ferry binary. Returns a process exit code.

#include <cstddef>
#include <string>
#include <vector>

namespace ferry::xfer {

struct KvBenchOptions {
  std::string endpoint = "unix:ferry.agent";
  std::vector<std::size_t> block_sizes{16u << 10, 64u << 10, 256u << 10, 1u << 20, 32u << 20};
  std::size_t total_bytes = 4ull << 30;   // moved per block size and direction
  std::size_t batch_bytes = 256u << 20;   // bytes per transfer request (batch = this / block size)
  std::string mem = "vram";               // vram or dram
  bool baselines = true;                  // also time cudaMemcpyAsync loop / cudaMemcpyBatchAsync (or memcpy)
  int baseline_streams = 4;  // and cudaMemcpyAsync over this many streams, a thread each (GPU memory)
  std::string json_out = "kv_bench.json";
};

int kv_bench(const KvBenchOptions& o);

}  // namespace ferry::xfer
