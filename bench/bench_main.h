#pragma once
// What the benchmark programs (ferry-launch-bench, ferry-kv-bench) share: the
// log-level flags on the scale ferry's subcommands use, and running the
// benchmark with its errors reported by the program's name.

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/log.h"
#include "ferry/core/status.h"

namespace ferry::bench {

struct LogLevels {
  int app = 50;  // INFO, as ferry's subcommands
  int sdk = 40;  // WARNING
};

inline void add_log_level_flags(CLI::App& app, LogLevels& levels) {
  const auto levels_scale = CLI::IsMember({10, 20, 30, 40, 50, 60, 70});
  app.add_option("-l,--log-level", levels.app,
                 "Log level: 10 DISABLE, 20 CRITICAL, 30 ERROR, 40 WARNING, 50 INFO, 60 DEBUG, 70 TRACE")
      ->check(levels_scale)
      ->capture_default_str();
  app.add_option("--sdk-log-level", levels.sdk,
                 "Log level of Ferry's OS, socket and CUDA plumbing, same scale")
      ->check(levels_scale)
      ->capture_default_str();
}

// A number from min to max. CLI::Range lets "nan" through (no comparison
// with it is true), which would make a deadline of nothing.
inline CLI::Validator finite_range(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(v) && v >= min && v <= max)
          return {};
        char range[64];
        std::snprintf(range, sizeof(range), "%g to %g", min, max);
        return value + " is not a number from " + range;
      },
      "NUMBER");
}

// Starts the log as `role` and returns run()'s exit code, or 1 after printing
// a ferry::Error as "program: reason".
template <typename Run>
int run_bench(const char* program, const char* role, const LogLevels& levels, Run&& run) {
  try {
    log::init(role, levels.app, levels.sdk);
    return run();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace ferry::bench
