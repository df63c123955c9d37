#pragma once
// Each subcommand registers its flags and, once parsed, the function that runs it.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "general_flags.h"

namespace ferry::app {

struct Command {
  std::string role;           // log tag: "server", "orchestrator", ...
  std::function<int()> run;   // set by the chosen subcommand's callback
};

void register_server(CLI::App& app, GeneralFlags& general, Command& command);
void register_orchestrator(CLI::App& app, GeneralFlags& general, Command& command);
void register_client(CLI::App& app, GeneralFlags& general, Command& command);
void register_demo(CLI::App& app, GeneralFlags& general, Command& command);
void register_agent(CLI::App& app, GeneralFlags& general, Command& command);
void register_kv(CLI::App& app, GeneralFlags& general, Command& command);
void register_http(CLI::App& app, GeneralFlags& general, Command& command);
void register_l2fwd(CLI::App& app, GeneralFlags& general, Command& command);

}  // namespace ferry::app
