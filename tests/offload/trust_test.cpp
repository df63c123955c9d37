// The security review's findings against `ferry server` and `ferry
// orchestrator`, one regression test each (docs/security.md): who may attach,
// whom the orchestrator trusts, shared memory that cannot crash the server, a
// silent or frozen peer, and running out of descriptors.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/arena.h"
#include "ferry/core/control_link.h"
#include "ferry/core/status.h"
#include "support/ferry_processes.h"
#include "support/proc_stats.h"
#include "support/raw_client.h"

namespace ferry::test {
namespace {

constexpr uid_t kNobody = 65534;

// One request answered by a running pipeline (the default handler reverses).
void expect_served(std::uint16_t port, const std::string& payload) {
  RawClient c(port);
  c.send_bytes(RawClient::request(payload));
  auto f = c.read_frame(10);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->payload, std::string(payload.rbegin(), payload.rend()));
}

// Finding 2: any local user could attach as the orchestrator of a server and
// see every request. The control socket now admits the server's own uid only,
// others by --allow-uid; and an orchestrator hands its arena only to a server
// of a uid it trusts, since any user can bind a free abstract socket name.
TEST(OffloadTrust, AnotherUsersOrchestratorIsRefusedUnlessAllowed) {
  if (!can_run_as_other_users()) GTEST_SKIP() << "needs root and setpriv to run a process as another user";
  FerryServer server;
  std::string out;
  // (It trusts the root server, so that it is the server that refuses.)
  EXPECT_EQ(run_ferry_as(kNobody, {"orchestrator", "-c", server.channel(), "-t", "1", "--backend", "cpu", "--connect-timeout", "5",
                                   "--allow-uid", "0"},
                         &out, 30),
            1)
      << out;
  EXPECT_NE(out.find("uid 65534 is not allowed"), std::string::npos) << out;
  EXPECT_NE(server.log().find("refused a control peer"), std::string::npos) << server.log();

  // Let in by the server, the orchestrator still refuses a root server unless it trusts uid 0.
  FerryServer open_server({"--allow-uid", std::to_string(kNobody)});
  EXPECT_EQ(run_ferry_as(kNobody, {"orchestrator", "-c", open_server.channel(), "-t", "1", "--backend", "cpu",
                                   "--connect-timeout", "5"},
                         &out, 30),
            1)
      << out;
  EXPECT_NE(out.find("is not trusted with the arena"), std::string::npos) << out;

  FerryOrchestrator orch(open_server.channel(), {"--allow-uid", "0"}, 1, kNobody);
  ASSERT_TRUE(wait_for_log([&] { return orch.log(); }, "attached to server")) << orch.log() << open_server.log();
  expect_served(open_server.port(), "allowed");
}

TEST(OffloadTrust, AnOrchestratorRefusesAServerOfAnotherUser) {
  if (!can_run_as_other_users()) GTEST_SKIP() << "needs root and setpriv to run a process as another user";
  // An impostor (another user) holds the channel name: it gets no arena.
  FerryServer impostor({"--allow-any-uid"}, 1, kNobody);
  std::string out;
  EXPECT_EQ(run_ferry({"orchestrator", "-c", impostor.channel(), "-t", "1", "--backend", "cpu", "--connect-timeout", "5"}, &out,
                      30),
            1)
      << out;
  EXPECT_NE(out.find("uid 65534 is not allowed"), std::string::npos) << out;
  EXPECT_EQ(impostor.log().find("attached"), std::string::npos) << impostor.log();
}

// Finding 3: the server mapped the orchestrator's arena unsealed, so shrinking
// the memfd killed it with SIGBUS. Now an unsealed arena is refused.
TEST(OffloadTrust, AnUnsealedArenaIsRefusedAndShrinkingCannotKillTheServer) {
  FerryServer server;
  // A well-formed arena, copied into a memfd that is not sealed.
  ArenaParams params;
  params.num_channels = 1;
  params.max_concurrent_messages = 1024;
  params.max_message_length = 256;
  Arena good = Arena::create(params, "trust-test-arena");
  const int fd = memfd_create("unsealed-arena", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(good.size())), 0);
  void* copy = mmap(nullptr, good.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(copy, MAP_FAILED);
  std::memcpy(copy, good.header(), good.size());
  munmap(copy, good.size());

  std::optional<ControlLink> link;
  for (int i = 0; i < 100 && !link; ++i) {
    link = ControlLink::try_connect(server.channel());
    if (!link) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(link);
  link->send(wire::MsgId::ExchangeConsumerIdRequest, static_cast<std::uint32_t>(getpid()), fd);
  auto reply = link->recv(5000);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->id, wire::MsgId::FerryError);
  EXPECT_NE(reply->text.find("not sealed against shrinking"), std::string::npos) << reply->text;

  // Shrunk now, it would have killed a server that mapped it.
  ASSERT_EQ(ftruncate(fd, 0), 0);
  ::close(fd);
  FerryOrchestrator orch(server.channel());
  ASSERT_TRUE(wait_for_log([&] { return orch.log(); }, "attached to server")) << orch.log() << server.log();
  expect_served(server.port(), "still alive");
  EXPECT_FALSE(server.process().wait(0.0)) << server.log();
}

// Finding 8: a silent connection to the control socket held the server's only
// control slot, so the real orchestrator was refused and exited 1.
TEST(OffloadTrust, ASilentControlPeerDoesNotKeepTheOrchestratorOut) {
  FerryServer server;
  std::optional<ControlLink> silent;
  for (int i = 0; i < 100 && !silent; ++i) {
    silent = ControlLink::try_connect(server.channel());
    if (!silent) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(silent);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server has accepted it
  FerryOrchestrator orch(server.channel());
  ASSERT_TRUE(wait_for_log([&] { return orch.log(); }, "attached to server")) << orch.log() << server.log();
  expect_served(server.port(), "not kept out");
  // The silent peer is let go after its deadline, harmlessly.
  auto m = silent->recv(15000);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, wire::MsgId::FerryError);
  EXPECT_FALSE(orch.process().wait(0.0)) << orch.log();
  expect_served(server.port(), "still served");
}

// Finding 12: while the orchestrator was frozen, requests and new clients
// waited silently forever. Now --request-timeout detaches it and clients get
// no_workers, as when it dies; a new orchestrator is accepted afterwards.
TEST(OffloadTrust, AFrozenOrchestratorTimesOutAndClientsGetErrors) {
  FerryServer server({"--request-timeout", "1"});
  // Frozen for good: the process stopped, and its workers stuck too (a stopped
  // process's persistent kernel would go on answering). Its own watchdog
  // (--hang-timeout) is off for the test's length, as it is while stopped.
  auto orch = std::make_unique<FerryOrchestrator>(
      server.channel(), std::vector<std::string>{"--handler", "stall", "--hang-timeout", "60"});
  ASSERT_TRUE(wait_for_log([&] { return orch->log(); }, "attached to server")) << orch->log();
  {
    RawClient c(server.port());
    c.send_bytes(RawClient::request("before"));
    auto f = c.read_frame(10);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->payload, "before");  // the stall handler echoes
  }

  orch->process().signal(SIGSTOP);
  RawClient waiting(server.port());
  waiting.send_bytes(RawClient::request("FERRY-STALL frozen"));
  const auto start = std::chrono::steady_clock::now();
  auto f = waiting.read_frame(10);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(f) << server.log();
  EXPECT_EQ(f->msg_id, 64u);
  EXPECT_EQ(f->code_or_len, 5u) << f->payload;  // no_workers
  EXPECT_NE(f->payload.find("ServerOptions::request_timeout_s"), std::string::npos) << f->payload;
  EXPECT_LT(waited, 5.0);
  EXPECT_NE(server.log().find("treating it as hung"), std::string::npos) << server.log();

  // A new client is told at once.
  RawClient late(server.port());
  late.send_bytes(RawClient::request("late"));
  auto e = late.read_frame(5);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code_or_len, 5u);

  // Thawed, the old orchestrator finds the server gone and exits (its stuck
  // workers abandoned); a new one serves.
  orch->process().signal(SIGCONT);
  EXPECT_EQ(orch->process().wait(20), 1) << orch->log();
  orch = std::make_unique<FerryOrchestrator>(server.channel());
  ASSERT_TRUE(wait_for_log([&] { return orch->log(); }, "attached to server")) << orch->log() << server.log();
  expect_served(server.port(), "after");
}

// Finding 10: out of descriptors, the server's accept loop spun a full core and
// logged 10-20 MB/s. Now it pauses accepting and serves the clients it has.
TEST(OffloadTrust, OutOfDescriptorsTheServerBacksOffAndKeepsServing) {
  FerryServer server;
  FerryOrchestrator orch(server.channel());
  ASSERT_TRUE(wait_for_log([&] { return orch.log(); }, "attached to server")) << orch.log();
  RawClient existing(server.port());
  existing.send_bytes(RawClient::request("first"));
  ASSERT_TRUE(existing.read_frame(10));

  const pid_t pid = server.process().pid();
  const std::string limit = std::to_string(open_fds(pid) + 1);
  ASSERT_EQ(std::system(("prlimit --pid " + std::to_string(pid) + " --nofile=" + limit + ":" + limit).c_str()), 0);
  std::vector<RawClient> crowd;
  for (int i = 0; i < 50; ++i) crowd.emplace_back(server.port());  // queued in the backlog, never accepted
  const std::uint64_t before = cpu_ticks(pid);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::uint64_t used = cpu_ticks(pid) - before;
  EXPECT_LT(used, static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK)) / 2) << "CPU ticks in 2 s";

  existing.send_bytes(RawClient::request("second"));
  auto f = existing.read_frame(10);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->payload, "dnoces");
  EXPECT_LT(server.log().size(), 64u << 10);
  EXPECT_NE(server.log().find("cannot accept clients"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace ferry::test
