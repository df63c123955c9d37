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
// the command line is parsed: who besides the process's own uid may connect to
// a local endpoint of `what` ("the control socket", "the agent").
void add_peer_policy_flags(CLI::App& sub, PeerPolicy& policy, const std::string& what);

// Reads the -j/--json file named in argv (if any) and returns argv with its flags
// inserted after the subcommand name, skipping every flag the command line gives
// itself (command-line flags win). Accepts a flat object {"flag-name": value}
// and DOCA's {"doca_general_flags": {...}, "doca_program_flags": {...}}.
// Throws ferry::Error for unreadable JSON or unknown flags.
std::vector<std::string> apply_json_flags(CLI::App& app, const std::vector<std::string>& argv);

}  // namespace ferry::app
