// Random data pushed through a real agent and pulled back, in the ways
// applications use it: many blocks per request, several applications at once,
// notifications instead of polling, the TCP mode, and an application that vanishes.
#include <gtest/gtest.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/ferry_processes.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

using xfer::Agent;
using xfer::Buffer;
using xfer::XferOp;
using xfer::XferStatus;

TEST(XferRoundTrip, SizesFromOneByteToMegabytesComeBackIdentical) {
  FerryAgent agent_proc({"dram:256MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  // Around the checksum's 64 KiB leaves too: a last leaf of 1 byte (the kernel
  // leaves it to the CPU), of 300 bytes (the kernel hashes it), whole leaves.
  for (std::size_t size : {std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{65537},
                           std::size_t{65536 + 300}, std::size_t{2 * 65536}, (std::size_t{1} << 20) + 1,
                           (std::size_t{1} << 20) + 100000,
                           std::size_t{3} << 20}) {
    SCOPED_TRACE(size);
    Buffer buf = Buffer::allocate(xfer_env().mem, size);
    const auto data = random_bytes(size, size);
    buf.write(0, data.data(), size);
    agent.register_memory(buf);
    std::vector<xfer::DescResult> results;
    ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, size), {"obj"}, &results), XferStatus::Ok);
    EXPECT_EQ(results[0].tier, "dram:256MiB");
    EXPECT_EQ(results[0].size, size);
    buf.write(0, std::vector<std::uint8_t>(size, 0).data(), size);
    ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, size), {"obj"}, &results), XferStatus::Ok);
    EXPECT_EQ(results[0].size, size);
    std::vector<std::uint8_t> back(size);
    buf.read(0, back.data(), size);
    EXPECT_EQ(back, data);
  }
}

// A caching allocator (PyTorch's) hands out blocks inside larger cudaMalloc
// allocations: registering such a block must reach the right bytes.
TEST(XferRoundTrip, ABlockInsideALargerAllocationCanBeRegisteredByItself) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer big = Buffer::allocate(xfer_env().mem, 1 << 20);
  if (!big.on_gpu()) agent.register_memory(big);  // host memory is reached through its Buffer's memfd
  const auto data = random_bytes(65536, 12);
  big.write(196608, data.data(), data.size());
  auto* block = static_cast<std::uint8_t*>(big.data()) + 196608;
  const auto region = agent.register_memory(xfer_env().mem, block, 65536);
  EXPECT_EQ(region.addr, reinterpret_cast<std::uint64_t>(block));
  const std::vector<xfer::MemDesc> d{{reinterpret_cast<std::uint64_t>(block), 65536, 0}};
  ASSERT_EQ(run_request(agent, XferOp::Write, d, {"inner"}), XferStatus::Ok);
  big.write(196608, std::vector<std::uint8_t>(65536, 0).data(), 65536);
  ASSERT_EQ(run_request(agent, XferOp::Read, d, {"inner"}), XferStatus::Ok);
  std::vector<std::uint8_t> back(65536);
  big.read(196608, back.data(), back.size());
  EXPECT_EQ(back, data);
}

TEST(XferRoundTrip, ManySmallBlocksInOneRequestAreBatchedAndStayInOrder) {
  FerryAgent agent_proc({"dram:64MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = 16 << 10, kCount = 1000;
  Buffer buf = Buffer::allocate(xfer_env().mem, kBlock * kCount);
  const auto data = random_bytes(kBlock * kCount, 7);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  const auto keys = keys_of("layer0/block", kCount);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, kCount, kBlock), keys), XferStatus::Ok);
  // Pull them back in reverse order into the same buffer: block i must land at slot kCount-1-i.
  std::vector<std::string> reversed(keys.rbegin(), keys.rend());
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, kCount, kBlock), reversed), XferStatus::Ok);
  std::vector<std::uint8_t> back(data.size());
  buf.read(0, back.data(), back.size());
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(std::memcmp(&back[i * kBlock], &data[(kCount - 1 - i) * kBlock], kBlock), 0) << "block " << i;
  EXPECT_EQ(agent.list("layer0/").size(), kCount);
}

// A batch's lookup and removal in one round trip each, with an answer per key
// (what LMCache's exists and delete ask), in the caller's order.
TEST(XferRoundTrip, ExistsAndRemoveAnswerPerKeyInOrder) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = 4096, kCount = 4;
  Buffer buf = Buffer::allocate(xfer_env().mem, kBlock * kCount);
  const auto data = random_bytes(kBlock * kCount, 3);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  const auto stored = keys_of("chunk", kCount);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, kCount, kBlock), stored), XferStatus::Ok);
  const std::vector<std::string> asked = {stored[2], "missing", stored[0], stored[2], "also-missing"};
  EXPECT_EQ(agent.exists(asked), (std::vector<bool>{true, false, true, true, false}));
  EXPECT_EQ(agent.exists({}), std::vector<bool>{});
  const std::vector<std::string> gone = {stored[1], "missing", stored[3], stored[1]};
  EXPECT_EQ(agent.remove_each(gone), (std::vector<bool>{true, false, true, false}))
      << "a key removed earlier in the same call is not there the second time";
  EXPECT_EQ(agent.exists(stored), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(agent.remove(stored), 2u);
  EXPECT_EQ(agent.exists(stored), (std::vector<bool>(kCount, false)));
}

// Memory Ferry did not allocate (what a NumPy array or LMCache's own pinned
// buffer is): registered by address, reached by the agent's process with
// process_vm_readv/writev, pushed and pulled back byte for byte, with blocks
// on both sides of the zero-copy pool and of a staging slot.
TEST(XferRoundTrip, PlainHostMemoryIsReachedByCrossMemoryAttach) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = 64 << 10, kCount = 8;
  std::vector<std::uint8_t> src = random_bytes(kBlock * kCount, 21);
  std::vector<std::uint8_t> dst(kBlock * kCount, 0);
  agent.register_memory(xfer::MemType::Dram, src.data(), src.size());
  agent.register_memory(xfer::MemType::Dram, dst.data(), dst.size());
  const auto at = [](std::vector<std::uint8_t>& v) {
    std::vector<xfer::MemDesc> d;
    for (std::size_t i = 0; i < kCount; ++i) d.push_back({reinterpret_cast<std::uint64_t>(v.data()) + i * kBlock, kBlock, 0});
    return d;
  };
  const auto keys = keys_of("plain", kCount);
  ASSERT_EQ(run_request(agent, XferOp::Write, at(src), keys), XferStatus::Ok);
  ASSERT_EQ(run_request(agent, XferOp::Read, at(dst), keys), XferStatus::Ok);
  EXPECT_EQ(dst, src);
}

// Threads of one application registering plain memory at once: the agent
// answers only a few of a session's registrations at a time and refuses the
// rest, so the client queues them (a NIXL agent's threads do this).
TEST(XferRoundTrip, RegistrationsFromManyThreadsAtOnceAllSucceed) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr int kThreads = 12;
  constexpr std::size_t kBlock = 64 << 10;
  std::vector<std::vector<std::uint8_t>> blocks;
  for (int t = 0; t < kThreads; ++t) blocks.push_back(random_bytes(kBlock, 100 + t));
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int round = 0; round < 4; ++round) {
          const auto r = agent.register_memory(xfer::MemType::Dram, blocks[t].data(), kBlock);
          if (round < 3) agent.deregister_memory(r);
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  // And the registrations work: every block goes out and comes back.
  std::vector<xfer::MemDesc> descs;
  for (auto& b : blocks) descs.push_back({reinterpret_cast<std::uint64_t>(b.data()), kBlock, 0});
  const auto keys = keys_of("threads", kThreads);
  ASSERT_EQ(run_request(agent, XferOp::Write, descs, keys), XferStatus::Ok);
  const auto original = blocks;
  for (auto& b : blocks) std::fill(b.begin(), b.end(), 0);
  ASSERT_EQ(run_request(agent, XferOp::Read, descs, keys), XferStatus::Ok);
  EXPECT_EQ(blocks, original);
}

// Registered memory the application then unmaps: the transfer fails with a
// reason, and the agent goes on serving.
TEST(XferRoundTrip, PlainMemoryUnmappedAfterRegistrationFailsTheTransferWithAReason) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kLen = 1 << 20;
  void* p = mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 7, kLen);
  agent.register_memory(xfer::MemType::Dram, p, kLen);
  munmap(p, kLen);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Write, {{reinterpret_cast<std::uint64_t>(p), kLen, 0}}, {"gone"}, &results),
            XferStatus::IoError);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("not mapped"), std::string::npos) << results[0].error;
  EXPECT_EQ(write_one_fresh_block(agent), XferStatus::Ok);
}

// Memory mapped from a POSIX shm file, as LMCache's multiprocess mode keeps
// its L1 pool: registered with its file, reached by pread/pwrite. A file that
// then shrinks fails the transfer with a reason; nothing maps it, so nothing
// raises SIGBUS, and the agent goes on serving.
class SharedFileOverEachEndpoint : public ::testing::TestWithParam<const char*> {};

// Over TCP the agent takes the file from the application's process (pidfd_getfd), as a memfd.
INSTANTIATE_TEST_SUITE_P(XferRoundTrip, SharedFileOverEachEndpoint, ::testing::Values("unix", "tcp"));

TEST_P(SharedFileOverEachEndpoint, SharedFileMemoryIsReachedThroughTheFile) {
  FerryAgent agent_proc({"dram:16MiB"}, std::string(GetParam()) == "tcp"
                                            ? std::vector<std::string>{"--endpoint", "tcp:127.0.0.1:0"}
                                            : std::vector<std::string>{});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = 256 << 10, kCount = 8, kLen = kBlock * kCount, kSkip = 64 << 10;
  const std::string name = "/ferry-test-shm-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  shm_unlink(name.c_str());  // the descriptor keeps it
  ASSERT_EQ(ftruncate(fd, kSkip + 2 * kLen), 0);
  // Mapped from a file offset other than 0, as a pool mapped in parts would be.
  void* p = mmap(nullptr, 2 * kLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, kSkip);
  ASSERT_NE(p, MAP_FAILED);
  auto* src = static_cast<std::uint8_t*>(p);
  auto* dst = src + kLen;
  const std::vector<std::uint8_t> bytes = random_bytes(kLen, 31);
  std::memcpy(src, bytes.data(), kLen);
  agent.register_shared_file(p, 2 * kLen, fd, kSkip);
  const auto at = [&](std::uint8_t* base) {
    std::vector<xfer::MemDesc> d;
    for (std::size_t i = 0; i < kCount; ++i) d.push_back({reinterpret_cast<std::uint64_t>(base) + i * kBlock, kBlock, 0});
    return d;
  };
  const auto keys = keys_of("shm", kCount);
  ASSERT_EQ(run_request(agent, XferOp::Write, at(src), keys), XferStatus::Ok);
  ASSERT_EQ(run_request(agent, XferOp::Read, at(dst), keys), XferStatus::Ok);
  EXPECT_EQ(std::memcmp(dst, bytes.data(), kLen), 0);

  munmap(p, 2 * kLen);  // this process would take the SIGBUS; the agent must not
  ASSERT_EQ(ftruncate(fd, kSkip + kBlock), 0);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Write, at(src), keys, &results), XferStatus::IoError);
  ASSERT_EQ(results.size(), kCount);
  EXPECT_NE(results[1].error.find("shrank"), std::string::npos) << results[1].error;
  EXPECT_EQ(run_request(agent, XferOp::Read, at(dst), keys, &results), XferStatus::IoError);
  close(fd);
  EXPECT_TRUE(agent_proc.process().running()) << agent_proc.log();
  EXPECT_EQ(write_one_fresh_block(agent), XferStatus::Ok);
}

// A descriptor that is no regular file, or a range past the file's end, is refused at registration.
TEST(XferRoundTrip, SharedFileRegistrationChecksTheFile) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  std::vector<std::uint8_t> mem(4096);
  const auto refusal = [&](std::uint64_t len, int fd) {
    try {
      agent.register_shared_file(mem.data(), len, fd, 0);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("registered");
  };
  EXPECT_NE(refusal(mem.size(), pipe_fds[0]).find("not a regular file"), std::string::npos) << refusal(mem.size(), pipe_fds[0]);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  const int fd = memfd_create("ferry-test-small", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  EXPECT_NE(refusal(8192, fd).find("run past the shared file"), std::string::npos) << refusal(8192, fd);
  close(fd);
}

TEST(XferRoundTrip, CompletionRaisesTheNotifyFdWithTheMessage) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 1 << 20);
  agent.register_memory(buf);
  const auto req = agent.create_xfer_req(XferOp::Write, blocks_of(buf, 1, 1 << 20), keys_of("n", 1), "chunk 7 saved");
  ASSERT_EQ(agent.post(req), XferStatus::InProgress);
  pollfd pf{agent.notify_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&pf, 1, 20000), 1) << "no notification within 20 s";
  const auto notifs = agent.get_notifs();
  ASSERT_EQ(notifs.size(), 1u);
  EXPECT_EQ(notifs[0].request, req);
  EXPECT_EQ(notifs[0].message, "chunk 7 saved");
  EXPECT_EQ(notifs[0].status, XferStatus::Ok);
  EXPECT_EQ(agent.status(req), XferStatus::Ok);
  EXPECT_TRUE(agent.get_notifs().empty());
}

TEST(XferRoundTrip, ConcurrentApplicationsKeepTheirOwnRegistrationsAndData) {
  FerryAgent agent_proc({"dram:256MiB"});
  constexpr int kApps = 4;
  std::vector<std::thread> apps;
  std::vector<std::string> failures(kApps);
  for (int a = 0; a < kApps; ++a) {
    apps.emplace_back([&, a] {
      try {
        Agent agent(config_for(agent_proc.endpoint(), "app" + std::to_string(a)));
        constexpr std::size_t kBlock = 64 << 10, kCount = 64;
        Buffer buf = Buffer::allocate(xfer_env().mem, kBlock * kCount);
        agent.register_memory(buf);
        for (int round = 0; round < 5; ++round) {
          const auto data = random_bytes(kBlock * kCount, a * 100 + round);
          buf.write(0, data.data(), data.size());
          const auto keys = keys_of("app" + std::to_string(a) + "/", kCount);
          if (run_request(agent, XferOp::Write, blocks_of(buf, kCount, kBlock), keys) != XferStatus::Ok)
            throw std::runtime_error("push failed");
          buf.write(0, std::vector<std::uint8_t>(data.size(), 0).data(), data.size());
          if (run_request(agent, XferOp::Read, blocks_of(buf, kCount, kBlock), keys) != XferStatus::Ok)
            throw std::runtime_error("pull failed");
          std::vector<std::uint8_t> back(data.size());
          buf.read(0, back.data(), back.size());
          if (back != data) throw std::runtime_error("data differs in round " + std::to_string(round));
        }
      } catch (const std::exception& e) {
        failures[a] = e.what();
      }
    });
  }
  for (auto& t : apps) t.join();
  for (int a = 0; a < kApps; ++a) EXPECT_EQ(failures[a], "") << "app " << a;
}

TEST(XferRoundTrip, TcpModeReachesSharedMemoryThroughProc) {
  FerryAgent agent_proc({"dram:16MiB"}, {"--endpoint", "tcp:127.0.0.1:0"});
  ASSERT_EQ(agent_proc.endpoint().rfind("tcp:127.0.0.1:", 0), 0u) << agent_proc.endpoint();
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 100000);
  const auto data = random_bytes(100000, 3);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 100000), {"tcp-obj"}), XferStatus::Ok);
  buf.write(0, std::vector<std::uint8_t>(100000, 0).data(), 100000);
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, 100000), {"tcp-obj"}), XferStatus::Ok);
  std::vector<std::uint8_t> back(100000);
  buf.read(0, back.data(), back.size());
  EXPECT_EQ(back, data);
}

TEST(XferRoundTrip, AnApplicationThatVanishesMidTransferDoesNotDisturbOthers) {
  FerryAgent agent_proc({"dram:256MiB"});
  {
    Agent quitter(config_for(agent_proc.endpoint(), "quitter"));
    Buffer buf = Buffer::allocate(xfer_env().mem, 64 << 20);
    quitter.register_memory(buf);
    const auto req = quitter.create_xfer_req(XferOp::Write, blocks_of(buf, 64, 1 << 20), keys_of("q", 64));
    ASSERT_EQ(quitter.post(req), XferStatus::InProgress);
    // Leaves without waiting: its socket closes while the agent still copies its memory.
  }
  Agent agent(config_for(agent_proc.endpoint(), "stayer"));
  Buffer buf = Buffer::allocate(xfer_env().mem, 4096);
  const auto data = random_bytes(4096, 9);
  buf.write(0, data.data(), 4096);
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 4096), {"s"}), XferStatus::Ok);
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, 4096), {"s"}), XferStatus::Ok);
  EXPECT_TRUE(agent_proc.process().running());
}

}  // namespace
}  // namespace ferry::test
