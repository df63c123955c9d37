#pragma once
// `ferry kv`: push, pull, list and remove objects through a running agent, with
// the public ferry::xfer::Agent API. Each function returns a process exit code.
// (ferry-kv-bench, in bench/kv/, measures the agent.)

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
// One line per key, "found" or "missing" and the key; exit 1 if any is missing.
int kv_exists(const KvOptions& o);

}  // namespace ferry::xfer
