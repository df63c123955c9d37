#pragma once
// The general flags of every DOCA application, on every ferry subcommand:
// -h, -v, -l/--log-level, --sdk-log-level (numeric 10..70) and -j/--json.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
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

// The check of every duration flag (timeouts, intervals, waits): a finite
// number of `unit` ("seconds", "microseconds" or "nanoseconds") from 0 to
// about 31 years, or exactly `special` where the flag gives that value a
// meaning. CLI11 prefixes the refusal with the flag's name: "--stats-interval:
// nan is not a duration: give a finite number of seconds, from 0 to 1e+09".
CLI::Validator duration_check(const std::string& unit, const std::string& special = "");

// The check of a count flag whose library field has a least value: CLI11
// prefixes the refusal with the flag's name ("--max-batch: 0 is too small: give
// at least 1"), before the library sees it.
CLI::Validator at_least(long long least);

// --allow-uid UID|NAME (repeatable) and --allow-any-uid, filling `policy` when
// the command line is parsed: who besides the process's own uid may do `what`
// ("connect to the agent", "attach as the orchestrator").
void add_peer_policy_flags(CLI::App& sub, PeerPolicy& policy, const std::string& what);

// --metrics-port PORT (0 or absent: no endpoint) and --metrics-address ADDR:
// a service's GET /metrics and GET /health (core/metrics_endpoint.h).
void add_metrics_flags(CLI::App& sub, std::optional<std::uint16_t>& port, std::string& address);

}  // namespace ferry::app
