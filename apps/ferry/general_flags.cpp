#include "general_flags.h"

#include <cstdio>

namespace ferry::app {
namespace {

const auto kDocaLevels = CLI::IsMember({10, 20, 30, 40, 50, 60, 70});

}  // namespace

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
