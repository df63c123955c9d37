// The agent's tier chain seen from the application: eviction down the chain,
// data that survives an agent restart, and corruption that is caught.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "support/ferry_processes.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
using xfer::Agent;
using xfer::Buffer;
using xfer::XferOp;
using xfer::XferStatus;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("ferry-tiers-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// The object files under a file tier's directory (not temporaries).
std::vector<fs::path> object_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.' &&  // the tier's lock file
        e.path().string().find(".tmp") == std::string::npos)
      out.push_back(e.path());
  return out;
}

TEST(XferTiers, AFullDramTierMovesItsLeastRecentlyUsedObjectsToTheFileTier) {
  TempDir dir;
  FerryAgent agent_proc({"dram:4MiB", "file:" + dir.path.string()});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = 1 << 20, kCount = 12;  // 12 MiB through a 4 MiB dram tier
  Buffer buf = Buffer::allocate(xfer_env().mem, kBlock * kCount);
  const auto data = random_bytes(kBlock * kCount, 11);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  const auto keys = keys_of("evict/", kCount);
  for (std::size_t i = 0; i < kCount; ++i)  // one at a time, so "least recently used" is well defined
    ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kBlock, i), {keys[i]}), XferStatus::Ok);
  std::map<std::string, std::string> where;
  for (const auto& o : agent.list("evict/")) where[o.key] = o.tier;
  ASSERT_EQ(where.size(), kCount);
  EXPECT_EQ(where[keys[0]].rfind("file:", 0), 0u) << "the oldest object should have moved down";
  EXPECT_EQ(where[keys[kCount - 1]].rfind("dram:", 0), 0u) << "the newest object should still be in DRAM";
  // Every object is still readable, wherever it is, and the result says where.
  buf.write(0, std::vector<std::uint8_t>(data.size(), 0).data(), data.size());
  std::vector<xfer::DescResult> results;
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, kCount, kBlock), keys, &results), XferStatus::Ok);
  std::vector<std::uint8_t> back(data.size());
  buf.read(0, back.data(), back.size());
  EXPECT_EQ(back, data);
  EXPECT_EQ(results[0].tier.rfind("file:", 0), 0u);
}

TEST(XferTiers, FileTierDataSurvivesAnAgentRestart) {
  TempDir dir;
  FerryAgent agent_proc({"file:" + dir.path.string()});
  constexpr std::size_t kSize = 300000;
  const auto data = random_bytes(kSize, 5);
  {
    Agent agent(config_for(agent_proc.endpoint()));
    Buffer buf = Buffer::allocate(xfer_env().mem, kSize);
    buf.write(0, data.data(), kSize);
    agent.register_memory(buf);
    ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kSize), {"model@1@0@abc@bf16"}), XferStatus::Ok);
  }
  agent_proc.restart();
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, kSize);
  agent.register_memory(buf);
  std::vector<xfer::DescResult> results;
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, kSize), {"model@1@0@abc@bf16"}, &results),
            XferStatus::Ok)
      << (results.empty() ? "" : results[0].error);
  std::vector<std::uint8_t> back(kSize);
  buf.read(0, back.data(), kSize);
  EXPECT_EQ(back, data);
}

TEST(XferTiers, ACorruptedFileIsReportedNeverReturnedAsData) {
  TempDir dir;
  FerryAgent agent_proc({"file:" + dir.path.string()});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kSize = 50000;
  Buffer buf = Buffer::allocate(xfer_env().mem, kSize);
  const auto data = random_bytes(kSize, 8);
  buf.write(0, data.data(), kSize);
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kSize), {"victim"}), XferStatus::Ok);
  const auto files = object_files(dir.path);
  ASSERT_EQ(files.size(), 1u);
  {  // flip one byte in the middle of the stored data
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-static_cast<std::streamoff>(kSize / 2), std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(-static_cast<std::streamoff>(kSize / 2), std::ios::end);
    f.write(&c, 1);
  }
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, kSize), {"victim"}, &results),
            XferStatus::ChecksumMismatch);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("victim"), std::string::npos) << results[0].error;
  // The agent goes on serving.
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kSize), {"fine"}), XferStatus::Ok);
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, kSize), {"fine"}), XferStatus::Ok);
}

// Flips the byte at `flip_at` of every copy of `needle` in the agent's private
// anonymous memory (its dram tier's pool) through /proc/PID/mem: the test is the
// agent's parent, so it may. Returns the copies changed, or -1 when the kernel
// does not let this process write there.
int corrupt_agent_memory(pid_t pid, const std::vector<std::uint8_t>& needle, std::size_t flip_at) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR);
  if (fd < 0) return -1;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  std::vector<std::uint8_t> chunk;
  int changed = 0;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode >> path;
    if (perms != "rw-p" || !path.empty()) continue;  // not anonymous private memory
    const std::uint64_t lo = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const std::uint64_t hi = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (hi - lo > (1ull << 30)) continue;
    chunk.resize(hi - lo);
    if (::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(lo)) != static_cast<ssize_t>(chunk.size()))
      continue;  // memory the kernel will not show (device mappings)
    for (auto it = chunk.begin();
         (it = std::search(it, chunk.end(), needle.begin(), needle.end())) != chunk.end(); ++it) {
      const std::uint64_t at = lo + static_cast<std::uint64_t>(it - chunk.begin()) + flip_at;
      std::uint8_t c = 0;
      if (::pread(fd, &c, 1, static_cast<off_t>(at)) != 1) continue;
      c ^= 0x40;
      if (::pwrite(fd, &c, 1, static_cast<off_t>(at)) == 1) ++changed;
    }
  }
  ::close(fd);
  return changed;
}

// The dram tier's objects are verified on every pull too: by the CPU beside the
// copy engine, or by the copy kernel's own XXH3 (--copy=kernel).
//
// Sizes: 50000 (one checksum leaf, not a multiple of 16 or 1024: the kernel's
// tail paths), 200000 (several leaves, the kernel copies), 2 MiB + 1000 (the
// copy engines copy and the kernel hashes the bytes that landed, by default).
class CorruptedDramObject : public ::testing::TestWithParam<std::size_t> {};
INSTANTIATE_TEST_SUITE_P(XferTiers, CorruptedDramObject,
                         ::testing::Values(std::size_t{50000}, std::size_t{200000}, (std::size_t{2} << 20) + 1000));

TEST_P(CorruptedDramObject, IsReportedOnPullNeverReturnedAsData) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  const std::size_t kSize = GetParam();
  Buffer buf = Buffer::allocate(xfer_env().mem, kSize);
  const auto data = random_bytes(kSize, 9);
  buf.write(0, data.data(), kSize);
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kSize), {"victim"}), XferStatus::Ok);
  const std::vector<std::uint8_t> needle(data.begin(), data.begin() + 256);
  const int changed = corrupt_agent_memory(agent_proc.process().pid(), needle, kSize / 2);
  if (changed < 0) GTEST_SKIP() << "this process may not write the agent's memory (/proc/PID/mem)";
  ASSERT_GE(changed, 1) << "the object's bytes were not found in the agent's memory";
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, kSize), {"victim"}, &results),
            XferStatus::ChecksumMismatch);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("victim"), std::string::npos) << results[0].error;
  EXPECT_NE(results[0].error.find("checksum"), std::string::npos) << results[0].error;
  // The agent goes on serving: a fresh copy of the object reads back whole.
  buf.write(0, data.data(), kSize);  // the failed pull may have overwritten it
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kSize), {"victim"}), XferStatus::Ok);
  const std::vector<std::uint8_t> zeros(kSize, 0);
  buf.write(0, zeros.data(), kSize);
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, kSize), {"victim"}), XferStatus::Ok);
  std::vector<std::uint8_t> back(kSize);
  buf.read(0, back.data(), kSize);
  EXPECT_EQ(back, data);
}

TEST(XferTiers, AFullFileTierFailsOnlyTheTransfersThatDoNotFitAndTheAgentGoesOn) {
  TempDir dir;
  FerryAgent agent_proc({"file:" + dir.path.string() + ",capacity=1MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 2 << 20);
  agent.register_memory(buf);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 2 << 20), {"too-big"}, &results), XferStatus::NoSpace);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("too-big"), std::string::npos) << results[0].error;
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 512 << 10), {"fits"}), XferStatus::Ok);
  EXPECT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, 512 << 10), {"fits"}), XferStatus::Ok);
}

// A file tier on top streams host blocks above its pack threshold (the
// mover's streaming path): they need no staging slot, so blocks four times a
// slot's size go and come back whole, verified.
TEST(XferTiers, AFileTierStreamsBlocksLargerThanAStagingSlot) {
  if (xfer_env().mem != xfer::MemType::Dram) GTEST_SKIP() << "device blocks go through staging";
  TempDir dir;
  FerryAgent agent_proc({"file:" + dir.path.string() + ",threads=4"}, {"--staging-mib", "8", "--queue-depth", "2"});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = (16 << 20) + 4097, kCount = 3;  // slots are 4 MiB; a tail that is no whole page
  Buffer buf = Buffer::allocate(xfer_env().mem, kBlock * kCount);
  const auto data = random_bytes(kBlock * kCount, 21);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  const auto keys = keys_of("stream/", kCount);
  std::vector<xfer::DescResult> results;
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, kCount, kBlock), keys, &results), XferStatus::Ok)
      << (results.empty() ? "" : results[0].error);
  std::vector<std::uint8_t> zeros(data.size(), 0);
  buf.write(0, zeros.data(), zeros.size());
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, kCount, kBlock), keys, &results), XferStatus::Ok)
      << (results.empty() ? "" : results[0].error);
  std::vector<std::uint8_t> back(data.size());
  buf.read(0, back.data(), back.size());
  EXPECT_EQ(back, data);
  for (const auto& r : results) EXPECT_EQ(r.size, kBlock);
  // A buffer smaller than the object: TooLarge, with the object's size.
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, kBlock - 1), {keys[0]}, &results), XferStatus::TooLarge);
  EXPECT_EQ(results[0].size, kBlock);
}

// A file tier on top streams shared-file blocks above its pack threshold
// through the agent's own mapping of the file (one kernel copy each way). A
// file that then shrinks fails only the blocks it no longer holds, with a
// reason, and the agent goes on serving. (What is no longer in the file is
// not lent from the mapping; a shrink that races with a lent access is
// caught by the guard: tests/xfer/agent/guarded_access_test.cpp.)
TEST(XferTiers, SharedFileBlocksStreamIntoAFileTierAndAShrinkFailsOnlyThem) {
  TempDir dir;
  FerryAgent agent_proc({"file:" + dir.path.string()});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = (2 << 20) + 4096, kCount = 3, kLen = kBlock * kCount;
  const std::string name = "/ferry-test-shm-stream-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  shm_unlink(name.c_str());
  ASSERT_EQ(ftruncate(fd, 2 * kLen), 0);
  void* p = mmap(nullptr, 2 * kLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* src = static_cast<std::uint8_t*>(p);
  auto* dst = src + kLen;
  const std::vector<std::uint8_t> bytes = random_bytes(kLen, 32);
  std::memcpy(src, bytes.data(), kLen);
  agent.register_shared_file(p, 2 * kLen, fd, 0);
  const auto at = [&](std::uint8_t* base) {
    std::vector<xfer::MemDesc> d;
    for (std::size_t i = 0; i < kCount; ++i) d.push_back({reinterpret_cast<std::uint64_t>(base) + i * kBlock, kBlock, 0});
    return d;
  };
  const auto keys = keys_of("shm-stream", kCount);
  std::vector<xfer::DescResult> results;
  ASSERT_EQ(run_request(agent, XferOp::Write, at(src), keys, &results), XferStatus::Ok) << results[0].error;
  ASSERT_EQ(run_request(agent, XferOp::Read, at(dst), keys, &results), XferStatus::Ok) << results[0].error;
  EXPECT_EQ(std::memcmp(dst, bytes.data(), kLen), 0);

  munmap(p, 2 * kLen);
  ASSERT_EQ(ftruncate(fd, kBlock), 0);  // the first source block stays; the rest is gone
  EXPECT_EQ(run_request(agent, XferOp::Write, at(src), keys_of("after", kCount), &results), XferStatus::IoError);
  ASSERT_EQ(results.size(), kCount);
  EXPECT_EQ(results[0].status, XferStatus::Ok) << results[0].error;
  // Blocks stream on several lanes: whichever failed first carries the
  // detail (ferry/xfer/fault.h), the others a short phrase.
  const auto any_says = [&](const std::string& text) {
    std::string all;
    for (const auto& r : results) all += r.error + "\n";
    return all.find(text) != std::string::npos ? testing::AssertionSuccess() : testing::AssertionFailure() << all;
  };
  EXPECT_EQ(results[2].status, XferStatus::IoError);
  EXPECT_TRUE(any_says("shrank"));
  EXPECT_EQ(run_request(agent, XferOp::Read, at(dst), keys, &results), XferStatus::IoError);
  for (const auto& r : results) EXPECT_EQ(r.status, XferStatus::IoError) << r.error;
  close(fd);
  EXPECT_TRUE(agent_proc.process().running()) << agent_proc.log();
  EXPECT_EQ(write_one_fresh_block(agent), XferStatus::Ok);
}

// Issue 35, finding 7: the file tier counted the agent's hidden "u<uid>/"
// prefix against its key limit, so the usable length depended on the uid.
// Every user now gets one limit, refused at the agent with its reason.
TEST(XferTiers, EveryUserGetsTheSameKeyLimitOverAFileTier) {
  TempDir dir;
  std::vector<std::string> extra;
  const bool other_user = can_run_as_other_users();
  if (other_user) extra = {"--allow-uid", "65534"};
  FerryAgent agent_proc({"file:" + dir.path.string()}, extra);
  constexpr std::size_t kLimit = 4032 - 12;  // the tier's keys, less the longest "u<uid>/"
  const auto push = [&](std::optional<uid_t> as, std::size_t len, std::string* out) {
    const std::vector<std::string> args{"kv",          "push", std::string(len, 'k'), "--random-bytes", "100",
                                        "--endpoint", agent_proc.endpoint()};
    return as ? run_ferry_as(*as, args, out) : run_ferry(args, out);
  };
  std::vector<std::optional<uid_t>> users{std::nullopt};
  if (other_user) users.push_back(uid_t{65534});
  for (const auto& as : users) {
    std::string out;
    EXPECT_EQ(push(as, kLimit, &out), 0) << out;
    EXPECT_NE(push(as, kLimit + 1, &out), 0) << out;
    EXPECT_NE(out.find("limit of " + std::to_string(kLimit) + " bytes"), std::string::npos) << out;
  }
  EXPECT_TRUE(agent_proc.process().running());
}

}  // namespace
}  // namespace ferry::test
