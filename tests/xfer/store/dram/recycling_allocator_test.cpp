#include "xfer/store/dram/recycling_allocator.h"

#include <gtest/gtest.h>

#include <random>

#include "allocator_walk.h"

namespace ferry::xfer::store {
namespace {

constexpr std::uint64_t kPage = 4096;

TEST(RecyclingAllocator, ReusesTheLastFreedRangeOfTheSameLength) {
  RecyclingAllocator a(64 * kPage, kPage, 64 * kPage);
  const auto x = a.allocate(2 * kPage);
  const auto y = a.allocate(2 * kPage);
  ASSERT_TRUE(x && y);
  a.free(*x, 2 * kPage);
  a.free(*y, 2 * kPage);
  EXPECT_EQ(a.cached_bytes(), 4 * kPage);
  EXPECT_EQ(a.free_bytes(), 64 * kPage) << "cached ranges count as free";
  EXPECT_EQ(a.allocate(2 * kPage - 100), y) << "same rounded length, last freed first";
  EXPECT_EQ(a.allocate(2 * kPage), x);
  EXPECT_EQ(a.cached_bytes(), 0u);
}

TEST(RecyclingAllocator, MergesCachedRangesWhenNothingElseFits) {
  RecyclingAllocator a(4 * kPage, kPage, 4 * kPage);
  std::vector<std::uint64_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*a.allocate(kPage));
  EXPECT_FALSE(a.allocate(1));
  for (const auto p : pages) a.free(p, kPage);
  EXPECT_EQ(a.largest_free(), kPage) << "cached pages are not merged yet";
  const auto all = a.allocate(4 * kPage);
  ASSERT_TRUE(all) << "a failed fit flushes the cache, whose pages merge back into one range";
  EXPECT_EQ(*all, 0u);
  EXPECT_EQ(a.cached_bytes(), 0u);
}

TEST(RecyclingAllocator, StillRefusesWhatFragmentationForbids) {
  RecyclingAllocator a(4 * kPage, kPage, 4 * kPage);
  std::vector<std::uint64_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*a.allocate(kPage));
  a.free(pages[0], kPage);
  a.free(pages[2], kPage);
  EXPECT_FALSE(a.allocate(2 * kPage)) << "two free pages, but not adjacent";
  EXPECT_EQ(a.free_bytes(), 2 * kPage);
}

TEST(RecyclingAllocator, FreesBeyondTheBoundGoStraightToTheTrees) {
  RecyclingAllocator a(8 * kPage, kPage, 2 * kPage);
  std::vector<std::uint64_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*a.allocate(kPage));
  for (const auto p : pages) a.free(p, kPage);
  EXPECT_EQ(a.cached_bytes(), 2 * kPage);
  EXPECT_EQ(a.free_bytes(), 8 * kPage);
}

// The same random walk as PoolAllocator's, with lengths from a few sizes (the
// way KV blocks come): no overlap, exact accounting, and everything merges back.
TEST(RecyclingAllocator, RandomAllocateFreeKeepsAccounting) {
  RecyclingAllocator a(256 * kPage, kPage, 64 * kPage);
  std::mt19937 rng(11);
  const std::uint64_t lengths[] = {kPage, 4 * kPage, 16 * kPage - 7, 3 * kPage + 1};
  const auto live = test::random_walk(
      a, rng, 20000, [&](std::mt19937& r) { return lengths[r() % 4]; },
      [&] { ASSERT_LE(a.cached_bytes(), 64 * kPage); });
  for (const auto& [o, n] : live) a.free(o, n);
  a.flush();
  EXPECT_EQ(a.free_ranges(), 1u);
  EXPECT_EQ(a.largest_free(), a.size());
}

}  // namespace
}  // namespace ferry::xfer::store
