// The agent's trust boundaries (docs/security.md), each test a finding of the
// security review: who may connect, which memory it may hand over, what one
// session may cost the others.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/net.h"
#include "core/sanitizers.h"
#include "ferry/core/status.h"
#include "support/ferry_processes.h"
#include "support/proc_stats.h"
#include "xfer/wire/messages.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

using xfer::Agent;
using xfer::Buffer;
using xfer::XferOp;
using xfer::XferStatus;
namespace proto = xfer::proto;

constexpr uid_t kNobody = 65534;

// A peer that speaks the protocol by hand, as a hostile one would.
proto::FrameSocket raw_session(const std::string& endpoint, const std::string& name = "raw") {
  auto sock = proto::connect_to(proto::Endpoint::parse(endpoint), 5000);
  if (!sock.send(proto::encode(proto::Hello{proto::kVersion, name}))) throw std::runtime_error("hello not sent");
  auto ok = sock.recv();
  if (!ok || ok->type != proto::Type::HelloOk) throw std::runtime_error("no hello_ok");
  return sock;
}

// Sends a register and returns the agent's answer: "registered" (and the
// region's id in *region), or call_error's text.
std::string register_raw(proto::FrameSocket& sock, const proto::RegisterMsg& m, int pass_fd,
                         std::uint64_t* region = nullptr) {
  if (!sock.send(proto::encode(m), pass_fd)) return "send failed";
  auto f = sock.recv();
  if (!f) return "closed";
  proto::RegisterOk ok;
  if (f->type == proto::Type::RegisterOk && proto::decode(f->body, &ok)) {
    if (region != nullptr) *region = ok.region;
    return "registered";
  }
  proto::CallReply r;
  if (f->type != proto::Type::CallError || !proto::decode(f->type, f->body, &r)) return "unexpected reply";
  return r.text;
}

// Finding 1: a register named a path ("/proc/self/root/...") and the agent
// opened it read-write. Now memory over TCP is named by the owner's pid and fd,
// and whatever that fd is, the agent maps only a sealed memfd.
TEST(XferTrust, OverTcpTheAgentMapsOnlySealedMemfdsNeverAFileTheClientNames) {
  FerryAgent agent_proc({"dram:16MiB"}, {"--endpoint", "tcp:127.0.0.1:0"});
  const auto victim = std::filesystem::temp_directory_path() / ("ferry-victim-" + std::to_string(getpid()));
  { std::ofstream(victim) << std::string(4096, 'v'); }
  const int file_fd = ::open(victim.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file_fd, 0);
  auto sock = raw_session(agent_proc.endpoint());
  proto::RegisterMsg m;
  m.call = 1;
  m.len = 4096;
  m.owner_pid = static_cast<std::uint32_t>(getpid());
  m.owner_fd = file_fd;
  const std::string answer = register_raw(sock, m, -1);
  EXPECT_NE(answer.find("not a sealable memfd"), std::string::npos) << answer;
  ::close(file_fd);
  std::ifstream in(victim);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, std::string(4096, 'v'));
  std::filesystem::remove(victim);
  EXPECT_TRUE(agent_proc.process().running());
}

// Over Unix, memory comes only with its descriptor: a register without one is refused.
TEST(XferTrust, OverUnixSharedMemoryMustComeWithItsDescriptor) {
  FerryAgent agent_proc({"dram:16MiB"});
  auto sock = raw_session(agent_proc.endpoint());
  proto::RegisterMsg m;
  m.call = 1;
  m.len = 4096;
  m.owner_pid = static_cast<std::uint32_t>(getpid());
  m.owner_fd = 0;
  const std::string answer = register_raw(sock, m, -1);
  EXPECT_NE(answer.find("SCM_RIGHTS"), std::string::npos) << answer;
}

// Over TCP a client may name only processes of its own uid.
TEST(XferTrust, OverTcpAnotherUsersProcessCannotBeNamed) {
  if (!can_run_as_other_users()) GTEST_SKIP() << "needs root and setpriv to run a process as another user";
  FerryAgent agent_proc({"dram:16MiB"}, {"--endpoint", "tcp:127.0.0.1:0"});
  // Another user's process holding a sealed memfd (as a victim application would).
  const auto out = std::filesystem::temp_directory_path() / ("ferry-other-" + std::to_string(getpid()));
  Subprocess other = Subprocess::spawn(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
       "import os,sys,time,fcntl\n"
       "fd=os.memfd_create('victim', os.MFD_ALLOW_SEALING)\nos.ftruncate(fd,4096)\n"
       "fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)\n"
       "open(sys.argv[1]+'.tmp','w').write(str(fd))\nos.rename(sys.argv[1]+'.tmp', sys.argv[1])\ntime.sleep(30)\n",
       out.string()});
  for (int i = 0; i < 500 && !std::filesystem::exists(out); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(out));
  int fd = -1;
  std::ifstream(out) >> fd;
  auto sock = raw_session(agent_proc.endpoint());
  proto::RegisterMsg m;
  m.call = 1;
  m.len = 4096;
  m.owner_pid = static_cast<std::uint32_t>(other.pid());
  m.owner_fd = fd;
  const std::string answer = register_raw(sock, m, -1);
  EXPECT_NE(answer.find("does not run as uid 0"), std::string::npos) << answer;
  // Nor can its plain memory be named for cross-memory attach.
  m.call = 2;
  m.reach = proto::Reach::ProcessMemory;
  m.offset = 4096;
  const std::string plain = register_raw(sock, m, -1);
  EXPECT_NE(plain.find("does not run as uid 0"), std::string::npos) << plain;
  other.kill();
  std::filesystem::remove(out);
}

// Finding 3: an unsealed memfd could be shrunk under the agent's mapping (SIGBUS).
TEST(XferTrust, AnUnsealedMemfdIsRefusedAndShrinkingCannotKillTheAgent) {
  FerryAgent agent_proc({"dram:16MiB"});
  auto sock = raw_session(agent_proc.endpoint());
  const int fd = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  proto::RegisterMsg m;
  m.call = 1;
  m.len = 1 << 20;
  const std::string answer = register_raw(sock, m, fd);
  EXPECT_NE(answer.find("F_SEAL_SHRINK"), std::string::npos) << answer;
  ASSERT_EQ(ftruncate(fd, 0), 0);  // what the attack did next
  ::close(fd);
  // The memory Ferry hands over cannot shrink at all.
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 1 << 20);
  agent.register_memory(buf);
  if (buf.memfd() >= 0) {  // host memory, or emulated device memory (real GPU memory goes by CUDA IPC)
    EXPECT_NE(ftruncate(buf.memfd(), 0), 0);
    EXPECT_EQ(errno, EPERM);
  }
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 4, 4096), keys_of("s", 4)), XferStatus::Ok);
  EXPECT_TRUE(agent_proc.process().running());
}

// Finding 2: any local user could connect, and list, pull, overwrite and remove
// everyone's keys. Now other uids are refused unless allowed, and each uid has
// its own key space.
TEST(XferTrust, OtherUsersAreRefusedUnlessAllowedAndSeeOnlyTheirOwnKeys) {
  if (!can_run_as_other_users()) GTEST_SKIP() << "needs root and setpriv to run a process as another user";
  {
    FerryAgent closed({"dram:16MiB"});
    std::string out;
    EXPECT_NE(run_ferry_as(kNobody, {"kv", "ls", "--endpoint", closed.endpoint()}, &out), 0);
    EXPECT_NE(out.find("uid 65534 is not allowed"), std::string::npos) << out;
  }
  FerryAgent agent_proc({"dram:16MiB"}, {"--allow-uid", "65534"});
  const std::string ep = agent_proc.endpoint();
  std::string out;
  ASSERT_EQ(run_ferry({"kv", "push", "secret", "--random-bytes", "1000", "--endpoint", ep}, &out), 0) << out;
  ASSERT_EQ(run_ferry_as(kNobody, {"kv", "push", "mine", "--random-bytes", "10", "--endpoint", ep}, &out), 0) << out;
  ASSERT_EQ(run_ferry_as(kNobody, {"kv", "ls", "--endpoint", ep}, &out), 0) << out;
  EXPECT_NE(out.find("mine"), std::string::npos) << out;
  EXPECT_EQ(out.find("secret"), std::string::npos) << out;
  EXPECT_NE(run_ferry_as(kNobody, {"kv", "pull", "secret", "--out", "/dev/null", "--endpoint", ep}, &out), 0) << out;
  EXPECT_NE(out.find("not found"), std::string::npos) << out;
  EXPECT_NE(run_ferry_as(kNobody, {"kv", "rm", "secret", "--endpoint", ep}, &out), 0) << out;
  EXPECT_NE(out.find("removed 0 of 1"), std::string::npos) << out;
  // The same name in two namespaces is two objects.
  ASSERT_EQ(run_ferry_as(kNobody, {"kv", "push", "secret", "--random-bytes", "10", "--endpoint", ep}, &out), 0);
  ASSERT_EQ(run_ferry({"kv", "ls", "--endpoint", ep}, &out), 0) << out;
  EXPECT_NE(out.find("1000\t"), std::string::npos) << out;  // root's secret is untouched
  EXPECT_EQ(out.find("mine"), std::string::npos) << out;
}

// Finding 4: replies were sent from the copy threads with a blocking send, so
// one application that stopped reading stalled every other one.
TEST(XferTrust, AnApplicationThatReadsNoRepliesStallsNobodyAndIsCutOff) {
  FerryAgent agent_proc({"dram:64MiB"}, {"--queue-depth", "2", "--max-session-mib", "4", "--stall-timeout", "2"});
  Buffer hostile_buf = Buffer::allocate(xfer::MemType::Dram, 4096);
  auto hostile = raw_session(agent_proc.endpoint(), "never-reads");
  proto::RegisterMsg reg;
  reg.call = 1;
  reg.len = 4096;
  std::uint64_t region = 0;
  ASSERT_EQ(register_raw(hostile, reg, hostile_buf.memfd(), &region), "registered");
  // Many small blocks per request: each answer is ~60 KB, and nobody reads them.
  std::vector<std::string> keys = keys_of("h", 2000);
  proto::TransferMsg t;
  t.op = XferOp::Write;
  for (std::size_t i = 0; i < keys.size(); ++i) t.descs.push_back({region, i % 4096, 1, keys[i]});
  std::thread flood([&] {
    for (std::uint64_t r = 1; r <= 400; ++r) {
      t.request = r;
      if (!hostile.send(proto::encode(t))) return;  // cut off
    }
  });
  Agent agent(config_for(agent_proc.endpoint(), "reader"));
  Buffer buf = Buffer::allocate(xfer_env().mem, 64 << 10);
  agent.register_memory(buf);
  for (int round = 0; round < 20; ++round) {
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 16, 4096), keys_of("r", 16)), XferStatus::Ok);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "round " << round;
  }
  flood.join();
  for (int i = 0; i < 500 && agent_proc.log().find("never-reads") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (agent_proc.log().find("cut off") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(agent_proc.log().find("cut off"), std::string::npos) << agent_proc.log();
}

// Finding 5: a thread per connection, no cap; the agent aborted when it could
// not make one. Now sessions are capped, and the next one is refused by name.
TEST(XferTrust, SessionsBeyondMaxSessionsAreRefusedWithTheReason) {
  FerryAgent agent_proc({"dram:16MiB"}, {"--max-sessions", "2"});
  auto first = std::make_unique<Agent>(config_for(agent_proc.endpoint(), "one"));
  Agent second(config_for(agent_proc.endpoint(), "two"));
  try {
    Agent third(config_for(agent_proc.endpoint(), "three"));
    FAIL() << "a third session was admitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AgentServiceOptions::max_sessions"), std::string::npos) << e.what();
  }
  first.reset();
  // The agent notices the departure on its next turn.
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    try {
      Agent again(config_for(agent_proc.endpoint(), "again"));
      admitted = true;
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(admitted);
}

// Finding 9: one client drove the agent from 6 MiB to 1.5 GiB with 25 large
// requests. Now what a session holds is bounded and the excess is refused.
TEST(XferTrust, OneSessionCannotMakeTheAgentHoldUnboundedMemory) {
  FerryAgent agent_proc({"dram:64MiB"}, {"--max-session-mib", "16", "--queue-depth", "1", "--staging-mib", "8"});
  Agent agent(config_for(agent_proc.endpoint(), "greedy"));
  // 25 requests of 8 MB frames: 200 MB if the agent took them all in.
  constexpr std::size_t kDescs = 4000;
  Buffer buf = Buffer::allocate(xfer::MemType::Dram, kDescs);
  agent.register_memory(buf);
  // The agent's own footprint before the flood (a CUDA context alone is ~150 MiB);
  // unread under the sanitizers, which skip the check below.
  [[maybe_unused]] const std::uint64_t base_kib = peak_rss_kib(agent_proc.process().pid());
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < kDescs; ++i) keys.push_back(std::string(2000, 'k') + std::to_string(i));
  std::vector<xfer::XferReq> reqs;
  for (int r = 0; r < 25; ++r) {
    reqs.push_back(agent.create_xfer_req(XferOp::Write, blocks_of(buf, kDescs, 1), keys));
    ASSERT_EQ(agent.post(reqs.back()), XferStatus::InProgress) << "request " << r;
  }
  int refused = 0;
  for (auto req : reqs) {
    const XferStatus s = agent.wait(req, 120000);
    if (s == XferStatus::Unavailable) {
      ++refused;
      EXPECT_NE(agent.results(req).back().error.find("AgentServiceOptions::max_session_mib"),
                std::string::npos);
    } else {
      EXPECT_EQ(s, XferStatus::Ok) << agent.results(req)[0].error;
    }
  }
  EXPECT_GT(refused, 0);
  // The bound lies between the peak growth with the limit and without it, both
  // measured without a GPU (the copy thread keeps up with most of the 200 MB
  // sent; a slower tier would let more pile up).
// ASan's quarantine keeps freed memory resident; TSan's shadow memory is resident too.
#if !defined(FERRY_ASAN) && !defined(FERRY_TSAN)
  EXPECT_LT(peak_rss_kib(agent_proc.process().pid()) - base_kib, 86u * 1024)
      << "the agent's peak RSS grew this much, KiB, from " << base_kib;
#endif
  // A request larger than the whole allowance can never run: TooLarge, not "retry".
  std::vector<std::string> long_keys(kDescs, std::string(4000, 'x'));
  for (std::size_t i = 0; i < kDescs; ++i) long_keys[i] += std::to_string(i);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, kDescs, 1), long_keys, &results), XferStatus::TooLarge);
  EXPECT_NE(results[0].error.find("split it"), std::string::npos) << results[0].error;
}

// Finding 10: out of descriptors, the accept loop spun a full core and logged
// megabytes a second. Now it pauses accepting and serves who it has.
TEST(XferTrust, OutOfDescriptorsTheAgentBacksOffAndKeepsServing) {
#if defined(FERRY_ASAN) && defined(__clang__)
  // Clang's vptr check (UBSan) reads an object's vtable only after probing it
  // through a pipe (sanitizer_common's IsAccessibleMemoryRange); with no free
  // descriptor the probe fails and any object is reported as having an invalid
  // vptr. This agent runs out of descriptors on purpose, so its reports are
  // printed but do not stop it.
  const char* old_options = std::getenv("UBSAN_OPTIONS");
  const std::string saved = old_options != nullptr ? old_options : "";
  setenv("UBSAN_OPTIONS", (saved + (saved.empty() ? "" : ":") + "halt_on_error=0").c_str(), 1);
  FerryAgent agent_proc({"dram:16MiB"});
  if (old_options != nullptr)
    setenv("UBSAN_OPTIONS", saved.c_str(), 1);
  else
    unsetenv("UBSAN_OPTIONS");
#else
  FerryAgent agent_proc({"dram:16MiB"});
#endif
  Agent agent(config_for(agent_proc.endpoint(), "existing"));
  Buffer buf = Buffer::allocate(xfer_env().mem, 4096);
  agent.register_memory(buf);
  const pid_t pid = agent_proc.process().pid();
  const std::string limit = std::to_string(open_fds(pid) + 1);
  ASSERT_EQ(std::system(("prlimit --pid " + std::to_string(pid) + " --nofile=" + limit + ":" + limit).c_str()), 0);
  std::vector<proto::FrameSocket> crowd;
  for (int i = 0; i < 50; ++i) crowd.push_back(proto::connect_to(proto::Endpoint::parse(agent_proc.endpoint()), 5000));
  const std::uint64_t before = cpu_ticks(pid);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::uint64_t used = cpu_ticks(pid) - before;
  EXPECT_LT(used, static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK)) / 2) << "CPU ticks in 2 s";
  std::vector<xfer::DescResult> served;
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 4096), {"still-served"}, &served), XferStatus::Ok)
      << (served.empty() ? std::string() : served[0].error) << "\n" << agent_proc.log();
  EXPECT_LT(agent_proc.log().size(), 64u << 10);
  EXPECT_NE(agent_proc.log().find("cannot accept applications"), std::string::npos) << agent_proc.log();
}

// Finding 11: `ferry kv ls` failed once the listing passed the 64 MiB frame limit.
TEST(XferTrust, KvLsListsMoreThanOneFrameCanHold) {
  FerryAgent agent_proc({"dram:256MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kObjects = 17000;  // 17,000 keys of ~4 KB: ~68 MB of listing
  Buffer buf = Buffer::allocate(xfer::MemType::Dram, 4096);
  agent.register_memory(buf);
  const std::string stem(4000, 'k');
  for (std::size_t first = 0; first < kObjects; first += 4250) {
    std::vector<std::string> keys;
    for (std::size_t i = first; i < first + 4250; ++i) keys.push_back(stem + std::to_string(100000 + i));
    ASSERT_EQ(run_request(agent, XferOp::Write, std::vector<xfer::MemDesc>(keys.size(), blocks_of(buf, 1, 1)[0]), keys),
              XferStatus::Ok);
  }
  std::string out;
  ASSERT_EQ(run_ferry({"kv", "ls", "--endpoint", agent_proc.endpoint()}, &out), 0) << out.substr(0, 2000);
  std::size_t lines = 0;
  std::string previous;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line); ++lines) {
    const std::string key = line.substr(line.rfind('\t') + 1);
    EXPECT_LT(previous, key) << "line " << lines;  // in order, each once
    previous = key;
  }
  EXPECT_EQ(lines, kObjects);
}

// Finding 13: a client's name reached the log unescaped (forged log lines).
TEST(XferTrust, AnApplicationsNameCannotForgeLogLines) {
  FerryAgent agent_proc({"dram:16MiB"});
  { Agent agent(config_for(agent_proc.endpoint(), "evil\n[00:00:00.000] [agent] [ferry] [error] forged\x1b[2J")); }
  for (int i = 0; i < 200 && agent_proc.log().find("evil") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string log = agent_proc.log();
  EXPECT_NE(log.find("evil\\x0a[00:00:00.000]"), std::string::npos) << log;
  EXPECT_EQ(log.find("\n[00:00:00.000] [agent] [ferry] [error] forged"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
}

}  // namespace
}  // namespace ferry::test
