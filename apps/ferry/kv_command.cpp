#include "commands.h"
#include "kv_tool.h"

namespace ferry::app {

void register_kv(CLI::App& app, GeneralFlags& general, Command& command) {
  static xfer::KvOptions o;
  CLI::App* kv = app.add_subcommand(
      "kv", "Objects in a running 'ferry agent': push, pull, ls, rm, exists (ferry-kv-bench measures it)");
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
}

}  // namespace ferry::app
