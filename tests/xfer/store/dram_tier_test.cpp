#include "xfer/store/dram_tier.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ferry/core/status.h"
#include "xfer/store/checksum.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;

TEST(DramTier, RoundTripsEverySize) {
  DramTier t(16 << 20);
  EXPECT_EQ(t.describe(), "dram:16MiB");
  EXPECT_EQ(t.pool().size(), 16u << 20);
  const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, 3 << 20};
  for (std::size_t n : sizes) {
    const std::string key = "k" + std::to_string(n);
    const auto data = random_bytes(n, n);
    ASSERT_EQ(put_one(t, key, data), XferStatus::Ok) << n;
    const auto got = get_one(t, key);
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, data) << n;
    const auto meta = t.stat(key);
    ASSERT_TRUE(meta);
    EXPECT_EQ(meta->size, n);
    EXPECT_EQ(meta->checksum, checksum({data.data(), data.size()}));
  }
  EXPECT_EQ(t.list().size(), std::size(sizes));
  EXPECT_EQ(t.used(), 0u + 1 + 4095 + 4096 + 4097 + (3 << 20));
}

TEST(DramTier, MissingEmptyAndTooSmallBuffer) {
  DramTier t(1 << 20);
  EXPECT_EQ(get_one(t, "nope").status, XferStatus::NotFound);
  EXPECT_EQ(put_one(t, "", {1, 2}), XferStatus::InvalidDesc);
  ASSERT_EQ(put_one(t, "a", random_bytes(100, 1)), XferStatus::Ok);
  std::vector<std::uint8_t> small(99);
  GetItem item = test::get_item("a", {small.data(), small.size()});
  t.get({&item, 1});
  EXPECT_EQ(item.status, XferStatus::TooLarge);
  EXPECT_EQ(item.size, 100u) << "tells the caller how much room it needs";
  EXPECT_FALSE(t.remove("nope"));
  EXPECT_TRUE(t.remove("a"));
  EXPECT_EQ(t.used(), 0u);
  EXPECT_EQ(t.free_bytes(), 1u << 20);
}

TEST(DramTier, OverwriteReplacesAndFreesTheOldRange) {
  DramTier t(64 << 10);
  for (int i = 0; i < 50; ++i) {
    const auto data = random_bytes(20000 + i, i);
    ASSERT_EQ(put_one(t, "same", data), XferStatus::Ok) << i;
    EXPECT_EQ(get_one(t, "same").data, data);
  }
  EXPECT_EQ(t.used(), 20049u);
  EXPECT_EQ(t.list().size(), 1u);
}

TEST(DramTier, FullAndFragmentedIsNoSpace) {
  DramTier t(4 * 4096);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(put_one(t, "p" + std::to_string(i), random_bytes(4096, i)), XferStatus::Ok);
  std::string error;
  EXPECT_EQ(put_one(t, "more", random_bytes(1, 9), &error), XferStatus::NoSpace);
  EXPECT_NE(error.find("no free range"), std::string::npos) << error;
  ASSERT_TRUE(t.remove("p0"));
  ASSERT_TRUE(t.remove("p2"));
  EXPECT_EQ(put_one(t, "two-pages", random_bytes(8192, 3), &error), XferStatus::NoSpace)
      << "8 KiB free, but in two separate pages";
  EXPECT_EQ(put_one(t, "one-page", random_bytes(4096, 3)), XferStatus::Ok);
}

TEST(DramTier, LruOrderFollowsPutsAndGets) {
  DramTier t(1 << 20);
  for (const char* k : {"a", "b", "c", "d"}) ASSERT_EQ(put_one(t, k, random_bytes(1000, 1)), XferStatus::Ok);
  ASSERT_EQ(get_one(t, "a").status, XferStatus::Ok);  // a becomes the most recent
  (void)t.stat("b");                                   // stat is not a use
  EXPECT_EQ(t.lru_victims(1), (std::vector<std::string>{"b"}));
  EXPECT_EQ(t.lru_victims(2500), (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(t.lru_victims(1 << 30), (std::vector<std::string>{"b", "c", "d", "a"}));
}

TEST(DramTier, CorruptedPoolIsDetected) {
  DramTier t(1 << 20);
  const auto data = random_bytes(10000, 5);
  ASSERT_EQ(put_one(t, "x", data), XferStatus::Ok);
  // Flip a byte in the pool, as a stray DMA would.
  auto pool = t.pool();
  std::byte* p = pool.data();
  for (std::size_t i = 0; i < pool.size(); ++i)
    if (std::memcmp(p + i, data.data(), 64) == 0) {
      p[i + 5000] ^= std::byte{1};
      break;
    }
  const auto got = get_one(t, "x");
  EXPECT_EQ(got.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(got.error.find("'x'"), std::string::npos) << got.error;
}

TEST(DramTier, RejectsZeroCapacity) { EXPECT_THROW(DramTier(0), Error); }

}  // namespace
}  // namespace ferry::xfer::store
