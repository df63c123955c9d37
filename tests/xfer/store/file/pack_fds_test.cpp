// The pack descriptor cache (pack_fds.h).

#include "xfer/store/file/pack_fds.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

using test::TempDir;


// Files named p0, p1 ... in dir, each holding its own name.
std::vector<std::unique_ptr<PackFile>> make_packs(PackFds& fds, const std::string& dir, int n) {
  std::vector<std::unique_ptr<PackFile>> packs;
  for (int i = 0; i < n; ++i) {
    const std::string name = "p" + std::to_string(i);
    std::ofstream(dir + "/" + name) << name;
    packs.push_back(std::make_unique<PackFile>(&fds, i, name, -1, name.size()));
  }
  return packs;
}

std::string read_through(const PackFds::Lease& lease) {
  char buf[16] = {};
  const ssize_t n = pread(lease.fd(), buf, sizeof buf, 0);
  return n < 0 ? std::string("error") : std::string(buf, static_cast<std::size_t>(n));
}

TEST(PackFds, OpensOnDemandAndClosesTheLeastRecentlyUsedBeyondItsLimit) {
  TempDir dir;
  const int dir_fd = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir_fd, 0);
  {
    PackFds fds(dir_fd, false, 2);
    auto packs = make_packs(fds, dir.path(), 5);
    EXPECT_EQ(fds.open_count(), 0u);
    for (int round = 0; round < 3; ++round)
      for (auto& p : packs) {
        auto lease = fds.acquire(*p);
        ASSERT_GE(lease.fd(), 0) << p->name;
        EXPECT_EQ(read_through(lease), p->name);
        EXPECT_LE(fds.open_count(), 2u);
      }
    EXPECT_EQ(fds.reopens(), 15u) << "five packs through two slots: every acquire opened";
    // The two most recently used stay open: no open for them.
    { auto lease = fds.acquire(*packs[4]); }
    { auto lease = fds.acquire(*packs[3]); }
    EXPECT_EQ(fds.reopens(), 15u);
    packs.clear();
    EXPECT_EQ(fds.open_count(), 0u) << "a pack's descriptor closes with it";
  }
  close(dir_fd);
}

TEST(PackFds, ALeasedDescriptorStaysOpenPastTheLimitAndAnUnlink) {
  TempDir dir;
  const int dir_fd = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir_fd, 0);
  {
    PackFds fds(dir_fd, false, 1);
    auto packs = make_packs(fds, dir.path(), 3);
    std::vector<PackFds::Lease> held;
    for (auto& p : packs) held.push_back(fds.acquire(*p));
    EXPECT_EQ(fds.open_count(), 3u) << "packs being read are never closed";
    ASSERT_EQ(unlinkat(dir_fd, "p0", 0), 0);
    EXPECT_EQ(read_through(held[0]), "p0") << "an unlinked pack still reads through its lease";
    held.clear();
    EXPECT_EQ(fds.open_count(), 1u);
    auto again = fds.acquire(*packs[0]);
    EXPECT_LT(again.fd(), 0);
    EXPECT_EQ(again.error(), ENOENT);
    EXPECT_EQ(fds.open_count(), 1u);
  }
  close(dir_fd);
}

}  // namespace
}  // namespace ferry::xfer::store
