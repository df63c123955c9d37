// ferry: one binary, one subcommand per role (docs/architecture.md).

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "core/log.h"
#include "ferry/core/status.h"
#include "flag_names.h"
#include "json_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"Ferry: GPU/DPU offload systems on ordinary machines.\n"
               "Remote request offload: start 'ferry server', then 'ferry orchestrator', then clients;\n"
               "or run 'ferry demo' to see all three at work.\n"
               "KV-cache offload: start 'ferry agent --tier dram:1GiB', then use 'ferry kv' or the xfer API.\n"
               "HTTP: 'ferry http --port 8080 --cpu 0' serves pages with the parsing on the workers.\n"
               "Packets: 'ferry l2fwd -l 0-2 --vdev net_null0 -- --mode cpu' forwards a DPDK port's packets."};
  app.require_subcommand(1);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_all_flag("--help-all", "Show the help of every subcommand");

  ferry::app::GeneralFlags general;
  ferry::app::Command command;
  ferry::app::register_server(app, general, command);
  ferry::app::register_orchestrator(app, general, command);
  ferry::app::register_client(app, general, command);
  ferry::app::register_demo(app, general, command);
  ferry::app::register_agent(app, general, command);
  ferry::app::register_kv(app, general, command);
  ferry::app::register_http(app, general, command);
  ferry::app::register_l2fwd(app, general, command);

  try {
    std::vector<std::string> args(argv, argv + argc);
    // Called by a DOCA program's name (the install links them to ferry): that
    // name's role, so that scripts written for the reference run unchanged.
    const std::string called = std::filesystem::path(args[0]).filename().string();
    const std::string doca_prefix = "doca_dpu_gpu_remote_offload_";
    if (called.rfind(doca_prefix, 0) == 0) {
      const std::string role = called.substr(doca_prefix.size());
      // The reference client's statistics block by default; a later
      // --stats-format still wins (the last value is taken).
      if (role == "client")
        args.insert(args.begin() + 1, {role, "--stats-format", "doca"});
      else
        args.insert(args.begin() + 1, role);
    }
    args = ferry::app::apply_json_flags(app, args);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry: %s\n", ferry::app::in_flag_terms(e.what(), command.role).c_str());
    return 2;
  }

  try {
    ferry::log::init(command.role.c_str(), general.log_level, general.sdk_log_level);
    return command.run();
  } catch (const ferry::Error& e) {
    ferry::log::app().error("{}", ferry::app::in_flag_terms(e.what(), command.role));
    return 1;
  } catch (const std::exception& e) {
    ferry::log::app().critical("unexpected error: {}", e.what());
    return 1;
  }
}
