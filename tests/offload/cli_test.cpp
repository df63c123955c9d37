// The command line: DOCA's general flags on every subcommand, JSON flag files,
// and the demo.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

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
