#include "core/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry {
namespace {

TEST(SealedMemfd, CannotChangeSizeAndPassesTheCheck) {
  const int fd = create_sealed_memfd("test", 8192);
  EXPECT_EQ(require_sealed_memfd(fd, "it"), 8192u);
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd, 1 << 20), 0);
  // F_SEAL_SEAL: the seals themselves cannot change any more.
  EXPECT_NE(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
  ::close(fd);
}

TEST(SealedMemfd, AnUnsealedMemfdIsRefusedNamingTheSeal) {
  const int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  try {
    (void)require_sealed_memfd(fd, "the arena");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the arena is not sealed against shrinking"), std::string::npos) << e.what();
  }
  // Sealed against growing only is not enough either.
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW), 0);
  EXPECT_THROW((void)require_sealed_memfd(fd, "it"), Error);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(require_sealed_memfd(fd, "it"), 4096u);
  ::close(fd);
}

TEST(SealedMemfd, AFileOrAPipeIsNotSharedMemory) {
  char path[] = "/tmp/ferry-sealed-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  EXPECT_THROW((void)require_sealed_memfd(file, "it"), Error);
  ::close(file);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  try {
    (void)require_sealed_memfd(p[0], "the buffer");
    FAIL() << "accepted a pipe";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not shared memory"), std::string::npos) << e.what();
  }
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace ferry
