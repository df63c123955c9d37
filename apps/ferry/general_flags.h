#pragma once
// The general flags of every DOCA application, on every ferry subcommand:
// -h, -v, -l/--log-level, --sdk-log-level (numeric 10..70) and -j/--json.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "ferry/core/peer_policy.h"

namespace ferry::app {

struct GeneralFlags {
  int log_level = 50;      // INFO
  int sdk_log_level = 40;  // WARNING
  std::string json_path;   // consumed before parsing by apply_json_flags()
};

void add_general_flags(CLI::App& sub, GeneralFlags& flags);

// --allow-uid UID|NAME (repeatable) and --allow-any-uid, filling `policy` when
// the command line is parsed: who besides the process's own uid may do `what`
// ("connect to the agent", "attach as the orchestrator").
void add_peer_policy_flags(CLI::App& sub, PeerPolicy& policy, const std::string& what);

}  // namespace ferry::app
