// Memory that loses its pages under the agent (guarded_access.h): a SIGBUS in a
// guarded access ends that access, again and again on one thread (the signal
// mask comes back each time), and a shared file's mapping is lent only where
// the file still holds it (shared_file_memory.h).

#include "xfer/agent/guarded_access.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "xfer/agent/block_ref.h"
#include "xfer/agent/shared_file_memory.h"

namespace ferry::xfer::agent {
namespace {

constexpr std::size_t kLen = 4 << 20;

// A memfd of kLen bytes, mapped here; shrink() cuts it under the mapping.
class ShrinkingFile {
 public:
  ShrinkingFile() {
    fd_ = memfd_create("ferry-guard-test", MFD_CLOEXEC);
    EXPECT_EQ(ftruncate(fd_, kLen), 0);
    map_ = static_cast<std::uint8_t*>(mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    std::memset(map_, 7, kLen);
  }
  ~ShrinkingFile() {
    munmap(map_, kLen);
    close(fd_);
  }
  void shrink(std::size_t to) { ASSERT_EQ(ftruncate(fd_, static_cast<off_t>(to)), 0); }
  int fd() const { return fd_; }
  std::uint8_t* data() const { return map_; }

 private:
  int fd_ = -1;
  std::uint8_t* map_ = nullptr;
};

std::uint64_t sum_of(const std::uint8_t* p, std::size_t n) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < n; i += 4096) s += static_cast<const volatile std::uint8_t*>(p)[i];
  return s;
}

TEST(GuardedAccess, ASigbusEndsTheAccessEveryTimeAndTheThreadGoesOn) {
  ShrinkingFile file;
  std::uint64_t s = 0;
  EXPECT_TRUE(run_guarded([&] { s = sum_of(file.data(), kLen); }));
  EXPECT_EQ(s, 7u * (kLen / 4096));
  file.shrink(kLen / 2);
  // Three faults on this thread, and on another one: each ends only its access.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(run_guarded([&] { s = sum_of(file.data(), kLen); })) << i;
  std::thread([&] { EXPECT_FALSE(run_guarded([&] { s = sum_of(file.data(), kLen); })); }).join();
  EXPECT_TRUE(run_guarded([&] { s = sum_of(file.data(), kLen / 2); }));
}

TEST(GuardedAccess, ASharedFileIsLentOnlyWhereTheFileStillHoldsIt) {
  ShrinkingFile file;
  auto memory = SharedFileMemory::open(dup(file.fd()), 0, kLen);
  // Offsets in the file as RemoteMemory addresses, computed as integers (null
  // plus an offset is undefined).
  const auto remote_at = [](std::uint64_t offset) { return reinterpret_cast<const std::uint8_t*>(offset); };
  const auto* remote = remote_at(0);
  ASSERT_NE(memory->in_place(remote, kLen, false), nullptr);
  ASSERT_NE(memory->in_place(remote, kLen, true), nullptr);
  EXPECT_NE(memory->describe().find("mapped"), std::string::npos) << memory->describe();
  EXPECT_EQ(memory->in_place(remote_at(1), kLen, false), nullptr) << "past the registered range";

  file.shrink(kLen / 2 + 100);  // inside a page: the rest of that page would read as zeros
  EXPECT_NE(memory->in_place(remote, kLen / 2, false), nullptr);
  EXPECT_EQ(memory->in_place(remote_at(kLen / 2), 4096, false), nullptr);
  EXPECT_EQ(memory->in_place(remote, kLen, true), nullptr);

  // A streamed block's source over it: the part that is gone is not hashed in
  // place; asked anyway, it fails with the key and the reason.
  BlockRef block;
  block.app = const_cast<std::uint8_t*>(remote);
  block.len = kLen;
  block.remote = memory.get();
  PhaseStats phases;
  const AppSource source(block, "u0/chunk", phases);
  EXPECT_EQ(source.in_place(kLen / 2, 1 << 20), nullptr);
  // A copy out of the part still there works, and counts as the stream's copy.
  std::vector<std::uint8_t> piece(4096);
  Fault copy_fault;
  EXPECT_EQ(source.read(0, {piece.data(), piece.size()}, copy_fault), XferStatus::Ok) << copy_fault.detail();
  EXPECT_EQ(phases.histogram(Phase::StreamCopy).count(), 1u);
  std::vector<std::uint64_t> leaves(16);
  Fault fault;
  EXPECT_EQ(source.leaf_sums(kLen / 2, 1 << 20, leaves.data(), fault), XferStatus::IoError);
  EXPECT_NE(fault.detail().find("'u0/chunk'"), std::string::npos) << fault.detail();
  EXPECT_NE(fault.detail().find("went away"), std::string::npos) << fault.detail();
}

}  // namespace
}  // namespace ferry::xfer::agent
