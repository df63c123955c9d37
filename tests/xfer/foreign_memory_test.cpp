// The agent against an application's own memory turned hostile (issue 35,
// findings 1 and 2): a process that runs a setuid program after registering,
// and pages guarded by a userfaultfd that never serves a fault.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "ferry/core/status.h"
#include "support/ferry_processes.h"
#include "xfer/wire/messages.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

namespace proto = xfer::proto;
namespace fs = std::filesystem;
using xfer::XferOp;
using xfer::XferStatus;

constexpr uid_t kNobody = 65534;

std::optional<proto::Frame> recv_within(proto::FrameSocket& sock, int timeout_ms) {
  pollfd p{sock.fd(), POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return std::nullopt;
  return sock.recv();
}

proto::FrameSocket hello(const std::string& endpoint, const std::string& name) {
  auto sock = proto::connect_to(proto::Endpoint::parse(endpoint), 5000);
  EXPECT_TRUE(sock.send(proto::encode(proto::Hello{proto::kVersion, name})));
  auto ok = recv_within(sock, 5000);
  if (!ok || ok->type != proto::Type::HelloOk) throw std::runtime_error("no hello_ok within 5 s");
  return sock;
}

// The answer to a register within timeout_ms: "registered" (*region set), the
// agent's reason, or "no answer".
std::string register_process_memory(proto::FrameSocket& sock, const void* addr, std::size_t len, int timeout_ms,
                                    std::uint64_t* region = nullptr) {
  proto::RegisterMsg m;
  m.call = 7;
  m.reach = proto::Reach::ProcessMemory;
  m.offset = reinterpret_cast<std::uint64_t>(addr);
  m.len = len;
  m.owner_pid = static_cast<std::uint32_t>(getpid());
  if (!sock.send(proto::encode(m))) return "send failed";
  auto f = recv_within(sock, timeout_ms);
  if (!f) return "no answer";
  proto::RegisterOk ok;
  if (f->type == proto::Type::RegisterOk && proto::decode(f->body, &ok)) {
    if (region != nullptr) *region = ok.region;
    return "registered";
  }
  proto::CallReply r;
  return proto::decode(f->type, f->body, &r) ? r.text : "unexpected reply";
}

bool send_transfer(proto::FrameSocket& sock, std::uint64_t region, std::size_t len, XferOp op, const char* key) {
  proto::TransferMsg t;
  t.request = 9;
  t.op = op;
  t.descs.push_back({region, 0, len, key});
  return sock.send(proto::encode(t));
}

// The answer to the transfer sent last: "ok", the status and the first
// result's text, or "no answer" within timeout_ms.
std::string await_transfer(proto::FrameSocket& sock, int timeout_ms) {
  auto f = recv_within(sock, timeout_ms);
  if (!f) return "no answer";
  proto::TransferDone done;
  if (f->type != proto::Type::TransferDone || !proto::decode(f->body, &done)) return "unexpected reply";
  if (done.status == XferStatus::Ok) return "ok";
  return std::string(xfer::to_string(done.status)) + ": " + (done.results.empty() ? "" : done.results[0].error);
}

// One transfer of [0, len) of `region`, and its answer.
std::string transfer(proto::FrameSocket& sock, std::uint64_t region, std::size_t len, XferOp op, const char* key,
                     int timeout_ms) {
  if (!send_transfer(sock, region, len, op, key)) return "send failed";
  return await_transfer(sock, timeout_ms);
}

// Whether another application is served in full meanwhile: hello, a push of
// its own memory and the pull of it back, each within a few seconds.
bool another_client_is_served(const std::string& endpoint) {
  try {
    auto sock = hello(endpoint, "bystander");
    std::vector<std::uint8_t> data = random_bytes(8192, 3);
    std::uint64_t region = 0;
    if (register_process_memory(sock, data.data(), data.size(), 5000, &region) != "registered") return false;
    if (transfer(sock, region, data.size(), XferOp::Write, "bystander", 5000) != "ok") return false;
    const std::vector<std::uint8_t> sent = data;
    std::fill(data.begin(), data.end(), 0);
    return transfer(sock, region, data.size(), XferOp::Read, "bystander", 5000) == "ok" && data == sent;
  } catch (const std::exception&) {
    return false;
  }
}

// Anonymous memory whose pages fault into a userfaultfd that nobody serves.
// Closing the descriptor (the destructor) wakes whatever waits on it.
class UnservedUserfault {
 public:
  explicit UnservedUserfault(std::size_t len) : len_(len) {
    uffd_ = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (uffd_ < 0) return;
    uffdio_api api{};
    api.api = UFFD_API;
    mem_ = ::mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (::ioctl(uffd_, UFFDIO_API, &api) != 0 || mem_ == MAP_FAILED) close();
  }
  ~UnservedUserfault() { close(); }
  bool ok() const { return uffd_ >= 0 && mem_ != MAP_FAILED; }
  void* data() const { return mem_; }
  // From now on every page not yet present faults into the descriptor.
  bool guard() {
    ::madvise(mem_, len_, MADV_DONTNEED);
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<std::uint64_t>(mem_);
    reg.range.len = len_;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    return ::ioctl(uffd_, UFFDIO_REGISTER, &reg) == 0;
  }

 private:
  void close() {
    if (uffd_ >= 0) ::close(uffd_);
    uffd_ = -1;
    if (mem_ != MAP_FAILED) ::munmap(mem_, len_);
    mem_ = MAP_FAILED;
  }
  std::size_t len_;
  int uffd_ = -1;
  void* mem_ = MAP_FAILED;
};

// Finding 2: the probe of a registration ran on the event loop and slept on a
// userfaultfd page forever, and every other client timed out, even at hello.
TEST(XferForeignMemory, PagesBehindAnUnservedUserfaultfdStallNobody) {
  FerryAgent agent_proc({"dram:16MiB"});
  UnservedUserfault trap(64 << 10);
  if (!trap.ok() || !trap.guard()) GTEST_SKIP() << "no userfaultfd here: " << std::strerror(errno);
  auto attacker = hello(agent_proc.endpoint(), "attacker");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string answer = register_process_memory(attacker, trap.data(), 64 << 10, 10000);
  EXPECT_NE(answer.find("userfaultfd"), std::string::npos) << answer;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(6)) << answer;
  EXPECT_TRUE(another_client_is_served(agent_proc.endpoint()));
  EXPECT_TRUE(agent_proc.process().running());
}

// The same pages guarded after a registration that found them mapped: a copy
// lane waits on them in the kernel (process_vm_readv sleeps until a fault is
// served). At --memory-timeout the request is answered and the memory dropped;
// everyone else is served meanwhile, and the next transfer naming it fails at
// once.
TEST(XferForeignMemory, ACopyHeldByPagesThatNeverArriveIsAnsweredAtTheDeadline) {
  // Made first, so that the descriptor closes first: the held lane comes back
  // before the agent is asked to stop.
  FerryAgent agent_proc({"dram:16MiB"}, {"--memory-timeout", "1"});
  UnservedUserfault trap(64 << 10);
  if (!trap.ok()) GTEST_SKIP() << "no userfaultfd here: " << std::strerror(errno);
  std::memset(trap.data(), 1, 64 << 10);
  auto attacker = hello(agent_proc.endpoint(), "attacker");
  std::uint64_t region = 0;
  ASSERT_EQ(register_process_memory(attacker, trap.data(), 64 << 10, 10000, &region), "registered");
  if (!trap.guard()) GTEST_SKIP() << "userfaultfd cannot register this range: " << std::strerror(errno);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(send_transfer(attacker, region, 64 << 10, XferOp::Write, "held"));
  EXPECT_TRUE(another_client_is_served(agent_proc.endpoint()));
  const std::string answer = await_transfer(attacker, 10000);
  EXPECT_NE(answer.find("did not answer a copy within 1000 ms"), std::string::npos) << answer;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << answer;
  const auto t1 = std::chrono::steady_clock::now();
  const std::string again = transfer(attacker, region, 64 << 10, XferOp::Read, "held", 10000);
  EXPECT_NE(again.find("was dropped"), std::string::npos) << again;
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(500)) << again;
  EXPECT_TRUE(another_client_is_served(agent_proc.endpoint()));
  EXPECT_TRUE(agent_proc.process().running());
}

// exec_setuid_probe, built beside this test (in the build tree, or wherever
// the binaries were carried).
fs::path probe_binary() { return fs::path(Subprocess::self_exe()).parent_path() / "exec_setuid_probe"; }

// Two copies of exec_setuid_probe in a directory everyone may enter: a plain
// one for the attacker, and a setuid-root one for the program it execs.
// Removed with the object.
class ProbeCopies {
 public:
  ProbeCopies() : dir_(fs::temp_directory_path() / ("ferry-setuid-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
    ::chmod(dir_.c_str(), 0755);
    for (const auto& [path, mode] : {std::pair{plain(), 0755}, std::pair{setuid(), 04755}}) {
      fs::copy_file(probe_binary(), path, fs::copy_options::overwrite_existing);
      EXPECT_EQ(::chown(path.c_str(), 0, 0), 0);
      EXPECT_EQ(::chmod(path.c_str(), static_cast<mode_t>(mode)), 0);
    }
  }
  ~ProbeCopies() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string plain() const { return (dir_ / "attacker").string(); }
  std::string setuid() const { return (dir_ / "setuid-victim").string(); }

 private:
  fs::path dir_;
};

// Finding 1: an agent running as root let an admitted user read and write a
// setuid-root process. The user registered its own memory, forked, and the
// parent exec'd the setuid program; the child, keeping the session, pushed
// from the same addresses (the setuid process's memory) and pulled into them.
class XferSetuidExec : public ::testing::TestWithParam<const char*> {};

TEST_P(XferSetuidExec, AProcessThatExecsASetuidProgramIsNeverReachedThroughItsRegion) {
  if (!can_run_as_other_users()) GTEST_SKIP() << "needs root and setpriv to run a process as another user";
  std::vector<std::string> flags{"--allow-uid", "65534"};
  if (std::string(GetParam()) == "tcp") flags.insert(flags.end(), {"--endpoint", "tcp:127.0.0.1:0"});
  FerryAgent agent_proc({"dram:16MiB"}, flags);
  ProbeCopies probe;
  const std::string out = (fs::temp_directory_path() / ("ferry-setuid-out-" + std::to_string(getpid()))).string();
  Subprocess attacker = Subprocess::spawn({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                           probe.plain(), "attack", agent_proc.endpoint(), probe.setuid()},
                                          out);
  ASSERT_TRUE(attacker.wait(60).has_value());
  std::ifstream in(out);
  const std::string lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(out);
  ASSERT_NE(lines.find("setup: ok"), std::string::npos) << lines;
  if (lines.find("victim: euid 0") == std::string::npos)
    GTEST_SKIP() << "the setuid bit does not take effect here (a nosuid mount?): " << lines;
  EXPECT_NE(lines.find("victim: euid 0 intact"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("push: ok"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("pull: ok"), std::string::npos) << lines;
  EXPECT_NE(lines.find("has run another program (exec)"), std::string::npos) << lines;
  EXPECT_NE(lines.find("was dropped"), std::string::npos) << lines;
  EXPECT_TRUE(agent_proc.process().running());
}

INSTANTIATE_TEST_SUITE_P(Endpoints, XferSetuidExec, ::testing::Values("unix", "tcp"));

}  // namespace
}  // namespace ferry::test
