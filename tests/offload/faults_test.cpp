// Dead peers and mismatched peers: clients get errors, nothing hangs, and the
// server accepts a restarted orchestrator.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "support/ferry_processes.h"
#include "support/raw_client.h"

namespace ferry::test {
namespace {

TEST(Faults, OrchestratorDiesThenARestartedOneIsAccepted) {
  FerryServer server;
  auto orch = std::make_unique<FerryOrchestrator>(server.channel());
  RawClient before(server.port());
  before.send_bytes(RawClient::request("before"));
  ASSERT_TRUE(before.read_frame());

  // Keep a stream of requests going while the orchestrator is killed.
  std::string batch;
  for (int i = 0; i < 100; ++i) batch += RawClient::request(std::string(100, 'k'));
  before.send_bytes(batch);
  orch->process().signal(SIGKILL);
  ASSERT_TRUE(orch->process().wait(10));
  ASSERT_TRUE(wait_for_log([&] { return server.log(); }, "orchestrator link lost")) << server.log();

  // The client gets each of its 100 responses or, for those still in flight
  // when the workers died, a no_workers error: never silence.
  for (int i = 0; i < 100; ++i) {
    auto f = before.read_frame(10);
    ASSERT_TRUE(f) << "closed without an error after " << i << " responses";
    if (f->msg_id == 64) {
      EXPECT_EQ(f->code_or_len, 5u) << f->payload;
      EXPECT_TRUE(before.closed_by_peer());
      break;
    }
    EXPECT_EQ(f->payload, std::string(100, 'k'));
  }
  // A request while no orchestrator is attached: no_workers.
  RawClient during(server.port());
  during.send_bytes(RawClient::request("during"));
  auto e = during.read_frame();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->msg_id, 64u);
  EXPECT_EQ(e->code_or_len, 5u);

  orch = std::make_unique<FerryOrchestrator>(server.channel());
  ASSERT_TRUE(wait_for_log([&] { return orch->log(); }, "attached to server")) << orch->log();
  RawClient after(server.port());
  after.send_bytes(RawClient::request("after"));
  auto f = after.read_frame();
  ASSERT_TRUE(f) << server.log();
  EXPECT_EQ(f->payload, "retfa") << "the restarted orchestrator serves";
}

TEST(Faults, AHungWorkerIsDetectedAndClientsGetErrorsNotSilence) {
  FerryServer server;
  // The stall handler never returns on a request starting with FERRY-STALL, and
  // ignores the stop flag, as a hung kernel would.
  FerryOrchestrator orch(server.channel(), {"--handler", "stall", "--hang-timeout", "2"});
  RawClient c(server.port());
  c.send_bytes(RawClient::request("healthy"));
  auto ok = c.read_frame(20);
  ASSERT_TRUE(ok) << orch.log();
  EXPECT_EQ(ok->payload, "healthy");  // stall echoes everything else

  const auto start = std::chrono::steady_clock::now();
  c.send_bytes(RawClient::request("FERRY-STALL now"));
  // The orchestrator notices no progress while a request waits, logs it, and
  // exits; the server then fails the waiting request instead of leaving it hanging.
  auto st = orch.process().wait(30);
  ASSERT_TRUE(st) << "the orchestrator did not shut down after its worker hung:\n" << orch.log();
  EXPECT_NE(*st, 0);
  EXPECT_NE(orch.log().find("treating them as hung"), std::string::npos) << orch.log();
  auto f = c.read_frame(20);
  ASSERT_TRUE(f) << "the client got silence:\n" << server.log();
  EXPECT_EQ(f->msg_id, 64u);
  EXPECT_EQ(f->code_or_len, 5u) << f->payload;  // no_workers
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(40));
  // The server stays up for the next orchestrator.
  EXPECT_TRUE(server.process().running());
}

TEST(Faults, ServerDiesUnderTheOrchestrator) {
  auto server = std::make_unique<FerryServer>();
  FerryOrchestrator orch(server->channel());
  RawClient c(server->port());
  c.send_bytes(RawClient::request("x"));
  ASSERT_TRUE(c.read_frame());
  server->process().signal(SIGKILL);
  const auto status = orch.process().wait(15);
  ASSERT_TRUE(status) << "the orchestrator must notice and exit";
  EXPECT_EQ(*status, 1);
  EXPECT_NE(orch.log().find("server went away"), std::string::npos) << orch.log();
  EXPECT_TRUE(c.closed_by_peer()) << "the dead server's clients see the connection end";
}

TEST(Faults, MismatchedFlagsAreRefusedWithAReason) {
  FerryServer server;
  {
    FerryOrchestrator wrong(server.channel(), {}, 2);  // two workers for one server thread
    const auto status = wrong.process().wait(15);
    ASSERT_TRUE(status);
    EXPECT_NE(*status, 0);
    EXPECT_NE(wrong.log().find("must be equal"), std::string::npos) << wrong.log();
  }
  {
    FerryOrchestrator wrong(server.channel(), {"--max-message-length", "512"});
    const auto status = wrong.process().wait(15);
    ASSERT_TRUE(status);
    EXPECT_NE(*status, 0);
    EXPECT_NE(wrong.log().find("--max-message-length 512 differs from the server's --max-message-length 256"),
              std::string::npos)
        << wrong.log();
  }
  FerryOrchestrator right(server.channel());
  RawClient c(server.port());
  c.send_bytes(RawClient::request("ok"));
  auto f = c.read_frame();
  ASSERT_TRUE(f) << server.log();
  EXPECT_EQ(f->payload, "ko");
}

TEST(Faults, SecondOrchestratorIsRefused) {
  FerryServer server;
  FerryOrchestrator first(server.channel());
  RawClient c(server.port());
  c.send_bytes(RawClient::request("1"));
  ASSERT_TRUE(c.read_frame());
  FerryOrchestrator second(server.channel());
  const auto status = second.process().wait(15);
  ASSERT_TRUE(status);
  EXPECT_NE(*status, 0);
  EXPECT_NE(second.log().find("already attached"), std::string::npos) << second.log();
  c.send_bytes(RawClient::request("2"));
  ASSERT_TRUE(c.read_frame()) << "the first keeps serving";
}

TEST(Faults, StalledControlPeerIsDropped) {
  // Something connects to the control channel, sends half a header and stalls:
  // the server must drop it (not hang its main loop) and then take a real
  // orchestrator.
  FerryServer server;
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "ferry." + server.channel();
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr),
                    static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  ASSERT_EQ(write(fd, "\0\0\0", 3), 3);
  ASSERT_TRUE(wait_for_log([&] { return server.log(); }, "stalled", 15)) << server.log();
  close(fd);
  FerryOrchestrator orch(server.channel());
  RawClient c(server.port());
  c.send_bytes(RawClient::request("after"));
  auto f = c.read_frame();
  ASSERT_TRUE(f) << server.log();
  EXPECT_EQ(f->payload, "retfa");
}

TEST(Faults, OrchestratorWithoutServerTimesOutClearly) {
  FerryOrchestrator lonely("no-such-server-" + std::to_string(getpid()), {"--connect-timeout", "1"});
  const auto status = lonely.process().wait(15);
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 1);
  EXPECT_NE(lonely.log().find("start the server first"), std::string::npos) << lonely.log();
}

}  // namespace
}  // namespace ferry::test
