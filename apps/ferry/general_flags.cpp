#include "general_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ferry::app {
namespace {

const auto kDocaLevels = CLI::IsMember({10, 20, 30, 40, 50, 60, 70});

}  // namespace

CLI::Validator duration_check(const std::string& unit, const std::string& special) {
  // The longest duration any flag takes, about 31 years: far beyond any
  // timeout, and far enough inside std::chrono's 64-bit nanoseconds (292
  // years) that a deadline made from it cannot overflow.
  constexpr double kMaxSeconds = 1e9;
  const double per_second = unit == "nanoseconds" ? 1e9 : unit == "microseconds" ? 1e6 : 1;
  return CLI::Validator(
      [unit, special, max = kMaxSeconds * per_second](std::string& value) -> std::string {
        if (!special.empty() && value == special) return {};
        // strtod reads "nan", "inf" and "1e999" (as infinity): none makes a
        // deadline, so they are refused here, by name, before any conversion.
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(v) && v >= 0 && v <= max) return {};
        char most[32];
        std::snprintf(most, sizeof(most), "%g", max);
        return value + " is not a duration: give a finite number of " + unit + ", from 0 to " + most +
               (special.empty() ? "" : ", or " + special);
      },
      "DURATION");
}

CLI::Validator at_least(long long least) {
  return CLI::Validator(
      [least](std::string& value) -> std::string {
        // What is not a number is left to the option's own conversion to refuse.
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || end != value.c_str() + value.size() || errno != 0 || v >= least) return {};
        return value + " is too small: give at least " + std::to_string(least);
      },
      ">=" + std::to_string(least));
}

void add_peer_policy_flags(CLI::App& sub, PeerPolicy& policy, const std::string& what) {
  sub.add_option_function<std::vector<std::string>>(
         "--allow-uid",
         [&policy](const std::vector<std::string>& users) {
           for (const auto& u : users) policy.allowed_uids.push_back(parse_uid(u));
         },
         "Also let this user (a uid or a name) " + what +
             "; repeatable. By default only this process's own uid may (docs/security.md)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub.add_flag("--allow-any-uid", policy.allow_any_uid,
               "Let every local user " + what + " (off by default: only this process's uid and --allow-uid)");
}

void add_metrics_flags(CLI::App& sub, std::optional<std::uint16_t>& port, std::string& address) {
  sub.add_option_function<std::uint16_t>(
      "--metrics-port",
      [&port](const std::uint16_t& p) {
        if (p == 0)
          port.reset();
        else
          port = p;
      },
      "Serve GET /metrics (Prometheus text) and GET /health on this TCP port; 0 or absent: not served");
  sub.add_option("--metrics-address", address, "The address --metrics-port listens on")
      ->capture_default_str();
}

void add_general_flags(CLI::App& sub, GeneralFlags& flags) {
  sub.add_option("-l,--log-level", flags.log_level,
                 "Log level: 10 DISABLE, 20 CRITICAL, 30 ERROR, 40 WARNING, 50 INFO, 60 DEBUG, 70 TRACE")
      ->check(kDocaLevels)
      ->capture_default_str();
  sub.add_option("--sdk-log-level", flags.sdk_log_level,
                 "Log level of Ferry's OS, socket and CUDA plumbing (the DOCA SDK's place), same scale")
      ->check(kDocaLevels)
      ->capture_default_str();
  sub.add_option("-j,--json", flags.json_path,
                 "Read flags from a JSON file ({\"flag-name\": value} or DOCA's doca_program_flags form); "
                 "flags on the command line win");
  sub.add_flag_callback(
      "-v,--version",
      [] {
        std::printf("ferry %s\n", FERRY_VERSION);
        throw CLI::Success();
      },
      "Print the version and exit");
}

}  // namespace ferry::app
