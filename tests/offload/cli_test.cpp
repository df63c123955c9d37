// The command line: DOCA's general flags on every subcommand, JSON flag files,
// and the demo.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/ferry_processes.h"
#include "support/raw_client.h"

namespace ferry::test {
namespace {

TEST(Cli, EverySubcommandHasHelpAndTheGeneralFlags) {
  for (const char* sub : {"server", "orchestrator", "client", "demo"}) {
    std::string out;
    EXPECT_EQ(run_ferry({sub, "--help"}, &out), 0) << sub;
    EXPECT_NE(out.find("--log-level"), std::string::npos) << sub << out;
    EXPECT_NE(out.find("--sdk-log-level"), std::string::npos) << sub;
    EXPECT_NE(out.find("--json"), std::string::npos) << sub;
    EXPECT_EQ(run_ferry({sub, "-v"}, &out), 0);
    EXPECT_NE(out.find("ferry "), std::string::npos);
  }
  std::string out;
  EXPECT_EQ(run_ferry({"server", "-h"}, &out), 0);
  EXPECT_NE(out.find("--max-concurrent-messages"), std::string::npos);
  EXPECT_NE(out.find("--representor-id"), std::string::npos);
}

TEST(Cli, BadFlagsAreRefusedWithAReason) {
  std::string out;
  EXPECT_NE(run_ferry({"server", "-p", "0", "--cpu", "0", "-l", "55"}, &out), 0);
  EXPECT_NE(out.find("55"), std::string::npos) << out;
  EXPECT_NE(run_ferry({"server", "-p", "0"}, &out), 0) << "--cpu is mandatory";
  EXPECT_NE(out.find("--cpu"), std::string::npos) << out;
  EXPECT_NE(run_ferry({"server", "-p", "0", "--cpu", "4096"}, &out), 0);
  EXPECT_NE(out.find("not a core"), std::string::npos) << out;
  EXPECT_NE(run_ferry({"orchestrator", "-t", "1", "--backend", "tpu"}, &out), 0);
  EXPECT_NE(run_ferry({"client", "-p", "1", "-t", "0"}, &out), 0);
}

// The library's errors name option fields ("ServerOptions::max_message_length"),
// since a program embedding Ferry has no flags; the binary's user gets the flag.
// A count is checked by CLI11 before the library is called; a check that needs
// the library (a slot's room, a staging slot's size) is mapped from the field
// to the flag where main() prints the error (apps/ferry/flag_names.cpp).
TEST(Cli, ErrorsNameTheFlagNotTheLibrarysField) {
  std::string out;
  EXPECT_NE(run_ferry({"server", "-p", "0", "--cpu", "0", "--max-clients-per-thread", "0"}, &out, 20), 0);
  EXPECT_NE(out.find("--max-clients-per-thread: 0 is too small: give at least 1"), std::string::npos) << out;
  EXPECT_NE(run_ferry({"http", "--cpu", "0", "-p", "0", "--max-batch", "0"}, &out, 20), 0);
  EXPECT_NE(out.find("--max-batch: 0 is too small: give at least 1"), std::string::npos) << out;
  EXPECT_NE(run_ferry({"server", "-p", "0", "--cpu", "0", "--max-message-length", "2"}, &out, 20), 0);
  EXPECT_NE(out.find("--max-message-length 2 leaves no room"), std::string::npos) << out;
  EXPECT_EQ(out.find("Options::"), std::string::npos) << out;
  const std::string endpoint = "unix:ferry-flag-names-test-" + std::to_string(getpid());
  // 1 MiB of staging in 8 slots of 128 KiB: a 4 MiB batch cannot fit one.
  EXPECT_NE(run_ferry({"agent", "--tier", "dram:1MiB", "--endpoint", endpoint, "--gpu", "none", "-m", "1",
                       "--chunk-kib", "4096"},
                      &out, 20),
            0);
  EXPECT_NE(out.find("--chunk-kib 4096 exceeds a staging slot (128 KiB = --staging-mib / --queue-depth)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("Options::"), std::string::npos) << out;
}

// Every duration flag of every subcommand refuses NaN, infinity, negative
// values and ones too long for a deadline at parse time, naming the flag: a NaN
// timeout would make a deadline that never comes (or always has), a negative
// one a deadline in the past, 1e300 seconds one that overflows.
TEST(Cli, EveryDurationFlagRefusesNanInfinityAndNegativeValuesNamingItself) {
  const std::string endpoint = "unix:ferry-duration-test-" + std::to_string(getpid());
  const std::vector<std::vector<std::string>> commands = {
      {"server", "-p", "0", "--cpu", "0", "--shutdown-timeout"},
      {"server", "-p", "0", "--cpu", "0", "--request-timeout"},
      {"orchestrator", "-t", "1", "--connect-timeout"},
      {"orchestrator", "-t", "1", "--hang-timeout"},
      {"orchestrator", "-t", "1", "--burst-timeout-us"},
      {"orchestrator", "-t", "1", "--idle-sleep-max-us"},
      {"client", "-p", "1", "--progress-interval"},
      {"client", "-p", "1", "--connect-timeout"},
      {"http", "--cpu", "0", "-p", "0", "--header-timeout"},
      {"http", "--cpu", "0", "-p", "0", "--idle-timeout"},
      {"http", "--cpu", "0", "-p", "0", "--max-wait-us"},
      {"http", "--cpu", "0", "-p", "0", "--batcher-spin-us"},
      {"http", "--cpu", "0", "-p", "0", "--batch-timeout"},
      {"agent", "--tier", "dram:1MiB", "--endpoint", endpoint, "--stall-timeout"},
      {"agent", "--tier", "dram:1MiB", "--endpoint", endpoint, "--memory-timeout"},
  };
  for (const auto& command : commands) {
    for (const char* value : {"nan", "inf", "-1", "1e300"}) {
      std::vector<std::string> args = command;
      args.push_back(value);
      const std::string& flag = command.back();
      std::string out;
      // Accepted, most of these would start a service: the timeout ends it.
      const int rc = run_ferry(args, &out, 5);
      EXPECT_NE(rc, 0) << flag << " " << value << " was accepted";
      EXPECT_NE(rc, -1) << flag << " " << value << " was accepted: the command ran on";
      EXPECT_NE(out.find(flag + ": " + value + " is not a duration"), std::string::npos) << flag << " " << value << ": " << out;
    }
  }
  // -1 is --lane-spin-us's "choose for me"; anything else below 0 is refused.
  for (const char* value : {"nan", "inf", "-2"}) {
    std::string out;
    EXPECT_NE(run_ferry({"agent", "--tier", "dram:1MiB", "--endpoint", endpoint, "--lane-spin-us", value}, &out, 5), 0);
    EXPECT_NE(out.find(std::string("--lane-spin-us: ") + value + " is not a duration"), std::string::npos) << out;
  }
}

TEST(Cli, JsonFlagsApplyAndTheCommandLineWins) {
  const auto path = std::filesystem::temp_directory_path() / ("ferry-flags-" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << R"({"doca_general_flags": {"log-level": 60},
                             "doca_program_flags": {"max-message-length": 64, "max-concurrent-messages": 16}})";
  // The server reads --max-message-length 64 from the file; the orchestrator gets it on its command line.
  FerryServer server({"-j", path.string()});
  FerryOrchestrator orch(server.channel(), {"--max-message-length", "64", "--max-concurrent-messages", "16"});
  RawClient c(server.port());
  c.send_bytes(RawClient::request(std::string(60, 'a')));
  auto ok = c.read_frame();
  ASSERT_TRUE(ok) << server.log();
  EXPECT_EQ(ok->msg_id, 4u);
  c.send_bytes(RawClient::request(std::string(61, 'a')));
  auto too_big = c.read_frame();
  ASSERT_TRUE(too_big);
  EXPECT_EQ(too_big->code_or_len, 2u) << "64 from the JSON file is the limit";

  std::string out;
  std::ofstream(path) << R"({"max-message-length": 64, "no-such-flag": 1})";
  EXPECT_NE(run_ferry({"server", "-p", "0", "--cpu", "0", "-j", path.string()}, &out), 0);
  EXPECT_NE(out.find("no-such-flag"), std::string::npos) << out;
  std::filesystem::remove(path);
}

TEST(Cli, CommandLineOverridesJson) {
  const auto path = std::filesystem::temp_directory_path() / ("ferry-flags2-" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << R"({"max-message-length": 64})";
  FerryServer server({"-j", path.string(), "--max-message-length", "256"});
  FerryOrchestrator orch(server.channel());
  RawClient c(server.port());
  c.send_bytes(RawClient::request(std::string(200, 'b')));
  auto f = c.read_frame();
  ASSERT_TRUE(f) << server.log();
  EXPECT_EQ(f->msg_id, 4u) << "256 from the command line, not 64 from the file";
  std::filesystem::remove(path);
}

TEST(Cli, DemoRunsAndShutsDownCleanly) {
  const auto& b = backend_under_test();
  std::string out;
  const int rc = run_ferry({"demo", "--backend", b.backend, "--launch", b.launch == "cpu" ? "persistent" : b.launch,
                            "-i", "3000", "--client-threads", "2"},
                           &out, 180);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Operation count: 6000"), std::string::npos) << out;
  EXPECT_NE(out.find("clean shutdown"), std::string::npos) << out;
}

}  // namespace
}  // namespace ferry::test
