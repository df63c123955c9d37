#include "commands.h"
#include "bench/kv/kv_bench.h"
#include "kv_tool.h"

namespace ferry::app {

void register_kv(CLI::App& app, GeneralFlags& general, Command& command) {
  static xfer::KvOptions o;
  static xfer::KvBenchOptions b;
  CLI::App* kv = app.add_subcommand("kv", "Objects in a running 'ferry agent': push, pull, ls, rm, exists, bench");
  kv->require_subcommand(1);
  const auto endpoint = [](CLI::App* s, std::string& e) {
    s->add_option("--endpoint", e, "The agent: unix:NAME or tcp:HOST:PORT")->capture_default_str();
  };
  const auto run = [&command](const char* role, int (*fn)(const xfer::KvOptions&)) {
    return [&command, role, fn] {
      command.role = role;
      command.run = [fn] { return fn(o); };
    };
  };

  CLI::App* push = kv->add_subcommand("push", "Store a file (or random bytes) under KEY");
  add_general_flags(*push, general);
  endpoint(push, o.endpoint);
  push->add_option("key", o.keys, "Object key")->required()->expected(1);
  push->add_option("--file", o.file, "Read the object from this file");
  push->add_option("--random-bytes", o.random_bytes, "Store this many random bytes instead");
  push->callback(run("kv", xfer::kv_push));

  CLI::App* pull = kv->add_subcommand("pull", "Fetch KEY, verified against its checksum, into a file or stdout");
  add_general_flags(*pull, general);
  endpoint(pull, o.endpoint);
  pull->add_option("key", o.keys, "Object key")->required()->expected(1);
  pull->add_option("--out", o.file, "Write here (default: stdout)");
  pull->callback(run("kv", xfer::kv_pull));

  CLI::App* ls = kv->add_subcommand("ls", "List objects: size, tier, key");
  add_general_flags(*ls, general);
  endpoint(ls, o.endpoint);
  ls->add_option("prefix", o.prefix, "Only keys starting with this");
  ls->add_flag("--json-lines", o.json, "One JSON object per line");
  ls->callback(run("kv", xfer::kv_ls));

  CLI::App* rm = kv->add_subcommand("rm", "Remove keys from every tier");
  add_general_flags(*rm, general);
  endpoint(rm, o.endpoint);
  rm->add_option("keys", o.keys, "Object keys")->required();
  rm->callback(run("kv", xfer::kv_rm));

  CLI::App* exists = kv->add_subcommand("exists", "Whether some tier holds each key (one round trip; exit 1 if any is missing)");
  add_general_flags(*exists, general);
  endpoint(exists, o.endpoint);
  exists->add_option("keys", o.keys, "Object keys")->required();
  exists->callback(run("kv", xfer::kv_exists));

  CLI::App* bench = kv->add_subcommand(
      "bench",
      "Push and pull through the agent at several block sizes (nixlbench's columns), beside the copy baselines "
      "(cudaMemcpyAsync loop, cudaMemcpyBatchAsync; memcpy without a GPU) in the same run");
  add_general_flags(*bench, general);
  endpoint(bench, b.endpoint);
  bench->add_option("--block-sizes", b.block_sizes, "Block sizes in bytes")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  bench->add_option("--total-bytes", b.total_bytes, "Bytes moved per block size and direction")->capture_default_str();
  bench->add_option("--batch-bytes", b.batch_bytes, "Bytes per transfer request (batch = this / block size)")
      ->capture_default_str();
  bench->add_option("--mem", b.mem, "Application memory: vram or dram")
      ->check(CLI::IsMember({"vram", "dram"}))
      ->capture_default_str();
  bench->add_flag("!--no-baselines", b.baselines, "Skip the copy baselines");
  bench->add_option("--json-out", b.json_out, "Where to write the JSON results")->capture_default_str();
  bench->callback([&command] {
    command.role = "kv";
    command.run = [] { return xfer::kv_bench(b); };
  });
}

}  // namespace ferry::app
