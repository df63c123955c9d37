#pragma once
// `ferry kv`: push, pull, list and remove objects through a running agent, and
// measure it (nixlbench's columns). Each function returns a process exit code.

#include <cstddef>
#include <string>
#include <vector>

namespace ferry::xfer {

struct KvOptions {
  std::string endpoint = "unix:ferry.agent";
  std::vector<std::string> keys;
  std::string file;          // push: read from this file; pull: write here ("-" or empty: stdout)
  std::size_t random_bytes = 0;  // push: this many random bytes instead of a file
  std::string prefix;        // ls
  bool json = false;         // ls: JSON lines
};

int kv_push(const KvOptions& o);
int kv_pull(const KvOptions& o);
int kv_ls(const KvOptions& o);
int kv_rm(const KvOptions& o);

struct KvBenchOptions {
  std::string endpoint = "unix:ferry.agent";
  std::vector<std::size_t> block_sizes{16u << 10, 64u << 10, 256u << 10, 1u << 20, 32u << 20};
  std::size_t total_bytes = 4ull << 30;   // moved per block size and direction
  std::size_t batch_bytes = 256u << 20;   // bytes per transfer request (batch = this / block size)
  std::string mem = "vram";               // vram or dram
  bool baselines = true;                  // also time cudaMemcpyAsync loop / cudaMemcpyBatchAsync (or memcpy)
  std::string json_out = "kv_bench.json";
};

int kv_bench(const KvBenchOptions& o);

}  // namespace ferry::xfer
