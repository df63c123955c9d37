// The pipeline end to end: real server and orchestrator processes, real sockets.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/ferry_processes.h"
#include "support/raw_client.h"

namespace ferry::test {
namespace {

std::string reversed(std::string s) {
  std::reverse(s.begin(), s.end());
  return s;
}

std::string random_payload(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 73 + seed * 31 + (i >> 3)) & 0xff);
  return s;
}

TEST(Pipeline, ReversesEveryMessageSize) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  RawClient c(server.port());
  // 1, 2, 255 and the maximum: 256 - 4 bytes of length prefix = 252.
  for (std::size_t n : {1u, 2u, 255u - 4u, 252u, 0u, 17u}) {
    const std::string payload = random_payload(n, static_cast<unsigned>(n));
    c.send_bytes(RawClient::request(payload));
    auto f = c.read_frame();
    ASSERT_TRUE(f) << "size " << n << "\n" << server.log();
    EXPECT_TRUE(f->msg_id == 4 || f->msg_id == 5);
    EXPECT_EQ(f->code_or_len, n);
    EXPECT_EQ(f->payload, reversed(payload)) << "size " << n;
  }
}

TEST(Pipeline, MacSwapHandlerServesFrames) {
  FerryServer server;
  FerryOrchestrator orch(server.channel(), {"--handler", "macswap"});
  RawClient c(server.port());
  const std::string dst = "\x01\x02\x03\x04\x05\x06", src = "\xaa\xbb\xcc\xdd\xee\xff";
  const std::string rest = "\x08\x00 the rest of the frame";
  c.send_bytes(RawClient::request(dst + src + rest));
  auto f = c.read_frame();
  ASSERT_TRUE(f) << server.log();
  EXPECT_EQ(f->payload, src + dst + rest);
}

TEST(Pipeline, LargerMaximumWithMatchingFlags) {
  FerryServer server({"--max-message-length", "4100"});
  FerryOrchestrator orch(server.channel(), {"--max-message-length", "4100"});
  RawClient c(server.port());
  for (std::size_t n : {255u, 4096u}) {
    const std::string payload = random_payload(n, 9);
    c.send_bytes(RawClient::request(payload));
    auto f = c.read_frame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, reversed(payload));
  }
}

TEST(Pipeline, PipelinedRequestsComeBackInOrder) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  RawClient c(server.port());
  std::string batch;
  for (int i = 0; i < 500; ++i) batch += RawClient::request("request-" + std::to_string(i));
  c.send_bytes(batch);  // 500 > the 128 window: the server pauses reading, nothing is lost
  for (int i = 0; i < 500; ++i) {
    auto f = c.read_frame();
    ASSERT_TRUE(f) << i;
    ASSERT_EQ(f->payload, reversed("request-" + std::to_string(i))) << "out of order at " << i;
  }
}

TEST(Pipeline, ClientBinaryValidatesAndReports) {
  FerryServer server({}, 2);
  FerryOrchestrator orch(server.channel(), {}, 2);
  const std::string json = (std::filesystem::temp_directory_path() / "ferry-e2e-client.json").string();
  std::string out;
  const int rc = run_ferry({"client", "-s", "127.0.0.1", "-p", std::to_string(server.port()), "-t", "4", "-i",
                            "5000", "-m", "abcdef", "--json-out", json},
                           &out);
  ASSERT_EQ(rc, 0) << out << server.log();
  EXPECT_NE(out.find("Operation count: 20000"), std::string::npos) << out;
  EXPECT_NE(out.find("IO rate:"), std::string::npos);
  EXPECT_NE(out.find("Duration (seconds):"), std::string::npos);
  std::ifstream in(json);
  const auto stats = nlohmann::json::parse(in);
  EXPECT_EQ(stats.at("operations").get<std::uint64_t>(), 20000u);
  EXPECT_GT(stats.at("latency_us").at("p99").get<double>(), 0.0);
  std::filesystem::remove(json);
}

// Called by the reference's name, the client prints the reference's statistics
// block, line for line, so that scripts parsing DOCA's output read Ferry's.
TEST(Pipeline, ClientByItsDocaNamePrintsDocasStatisticsBlock) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  const auto dir = std::filesystem::temp_directory_path() / ("ferry-doca-name-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto doca_client = dir / "doca_dpu_gpu_remote_offload_client";
  std::filesystem::create_symlink(ferry_bin(), doca_client);
  const auto out_path = dir / "out.txt";
  Subprocess p = Subprocess::spawn({doca_client.string(), "-p", std::to_string(server.port()), "-t", "2", "-i",
                                    "300", "-m", "abcdef"},
                                   out_path.string());
  const auto st = p.wait(60);
  std::ifstream in(out_path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(st && *st == 0) << server.log();
  const std::string rule = "+================================================+";
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[0], rule);
  EXPECT_EQ(lines[1], "| Stats");
  EXPECT_EQ(lines[2], rule);
  EXPECT_TRUE(std::regex_match(lines[3], std::regex(R"(\| Duration \(seconds\): \d+\.\d{6})"))) << lines[3];
  EXPECT_EQ(lines[4], "| Operation count: 600");
  EXPECT_TRUE(std::regex_match(lines[5], std::regex(R"(\| Tx Data rate: \d+\.\d{3} GiB/s)"))) << lines[5];
  EXPECT_TRUE(std::regex_match(lines[6], std::regex(R"(\| Rx Data rate: \d+\.\d{3} GiB/s)"))) << lines[6];
  EXPECT_TRUE(std::regex_match(lines[7], std::regex(R"(\| IO rate: \d+\.\d{3} MIOP/s)"))) << lines[7];
  EXPECT_EQ(lines[8], rule);
}

TEST(Pipeline, ClientReportsAWrongExpectedResponse) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  std::string out;
  const int rc = run_ferry(
      {"client", "-p", std::to_string(server.port()), "-i", "10", "-m", "abc", "-e", "abc"}, &out);
  EXPECT_NE(rc, 0) << "the server reverses, so 'abc' is not the response\n" << out;
  EXPECT_EQ(out.find("Operation count"), std::string::npos) << "statistics only when every thread succeeded";
}

TEST(Pipeline, ThousandConnectionsAtOnce) {
  FerryServer server({}, 2);
  FerryOrchestrator orch(server.channel(), {}, 2);
  std::vector<RawClient> clients;
  clients.reserve(1000);
  for (int i = 0; i < 1000; ++i) clients.emplace_back(server.port());
  for (int i = 0; i < 1000; ++i) clients[i].send_bytes(RawClient::request("conn" + std::to_string(i)));
  for (int i = 0; i < 1000; ++i) {
    auto f = clients[i].read_frame(30.0);
    ASSERT_TRUE(f) << i;
    ASSERT_EQ(f->payload, reversed("conn" + std::to_string(i)));
  }
}

TEST(Pipeline, ServerRefusesClientsBeyondItsLimit) {
  FerryServer server({"--max-clients-per-thread", "2"});
  FerryOrchestrator orch(server.channel());
  RawClient a(server.port()), b(server.port());
  a.send_bytes(RawClient::request("a"));
  ASSERT_TRUE(a.read_frame());
  b.send_bytes(RawClient::request("b"));
  ASSERT_TRUE(b.read_frame());
  RawClient c(server.port());
  auto f = c.read_frame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->msg_id, 64u);
  EXPECT_EQ(f->code_or_len, 6u) << "server_full";
  a.send_bytes(RawClient::request("still"));
  auto g = a.read_frame();
  ASSERT_TRUE(g);
  EXPECT_EQ(g->payload, "llits");
}

TEST(Pipeline, CtrlCOnTheServerShutsBothDownCleanly) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  RawClient c(server.port());
  c.send_bytes(RawClient::request("x"));
  ASSERT_TRUE(c.read_frame());
  server.process().signal(SIGINT);
  EXPECT_EQ(server.process().wait(15), 0) << server.log();
  EXPECT_EQ(orch.process().wait(15), 0) << orch.log();
  EXPECT_NE(orch.log().find("server asked to shut down"), std::string::npos) << orch.log();
}

TEST(Pipeline, CtrlCOnTheOrchestratorShutsBothDownCleanly) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  RawClient c(server.port());
  c.send_bytes(RawClient::request("x"));
  ASSERT_TRUE(c.read_frame());
  orch.process().signal(SIGTERM);
  EXPECT_EQ(orch.process().wait(15), 0) << orch.log();
  EXPECT_EQ(server.process().wait(15), 0) << server.log();
  EXPECT_NE(server.log().find("orchestrator asked to shut down"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace ferry::test
