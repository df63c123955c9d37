#include "xfer/store/dram/pool_allocator.h"

#include <gtest/gtest.h>

#include <random>

#include "ferry/core/status.h"
#include "allocator_walk.h"

namespace ferry::xfer::store {
namespace {

TEST(PoolAllocator, BestFitAndCoalescing) {
  PoolAllocator a(16 * 4096, 4096);
  const auto x = a.allocate(1);         // one page
  const auto y = a.allocate(3 * 4096);  // three
  const auto z = a.allocate(4096 + 1);  // two
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 4096u);
  EXPECT_EQ(*z, 4 * 4096u);
  EXPECT_EQ(a.free_bytes(), 10 * 4096u);
  a.free(*y, 3 * 4096);  // a three-page hole between x and z
  EXPECT_EQ(a.free_ranges(), 2u);
  // Two pages fit the hole best (not the ten-page tail).
  const auto w = a.allocate(2 * 4096);
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, 4096u);
  a.free(*w, 2 * 4096);
  a.free(*x, 1);
  a.free(*z, 4096 + 1);
  EXPECT_EQ(a.free_ranges(), 1u) << "every neighbour merged back";
  EXPECT_EQ(a.largest_free(), 16 * 4096u);
}

TEST(PoolAllocator, FragmentationRefusesWhatFreeBytesWouldAllow) {
  PoolAllocator a(4 * 4096, 4096);
  std::vector<std::uint64_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*a.allocate(4096));
  EXPECT_FALSE(a.allocate(1));
  a.free(pages[0], 4096);
  a.free(pages[2], 4096);
  EXPECT_EQ(a.free_bytes(), 2 * 4096u);
  EXPECT_FALSE(a.allocate(2 * 4096)) << "two free pages, but not adjacent";
  a.free(pages[1], 4096);
  EXPECT_TRUE(a.allocate(3 * 4096));
}

TEST(PoolAllocator, RandomAllocateFreeKeepsAccounting) {
  PoolAllocator a(256 * 4096, 4096);
  std::mt19937 rng(7);
  const auto live = test::random_walk(a, rng, 20000, [](std::mt19937& r) { return 1 + r() % (8 * 4096); });
  for (const auto& [o, n] : live) a.free(o, n);
  EXPECT_EQ(a.free_ranges(), 1u);
}

TEST(PoolAllocator, RejectsBadGeometry) {
  EXPECT_THROW(PoolAllocator(4096, 3), Error);
  EXPECT_THROW(PoolAllocator(4097, 4096), Error);
}

}  // namespace
}  // namespace ferry::xfer::store
