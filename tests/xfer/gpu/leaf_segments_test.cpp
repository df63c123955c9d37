// How the agent hands a large block to the copy kernel as checksum leaves, and
// rebuilds the block's checksum from theirs: the GPU path, checked on the CPU
// (the kernel's per-segment XXH3 is checked in xxh3_parts_test.cpp).
#include "xfer/gpu/leaf_segments.h"

#include <gtest/gtest.h>

#include "ferry/xfer/checksum.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::gpu {
namespace {


// The sums a kernel would report for segs: each segment's plain XXH3-64.
std::vector<std::uint64_t> sums_of(const std::vector<gpu::Segment>& segs) {
  std::vector<std::uint64_t> sums;
  for (const auto& s : segs) sums.push_back(whole_checksum({static_cast<const std::uint8_t*>(s.src), s.len}));
  return sums;
}

TEST(LeafSegments, ABlockIsCutAtLeafBoundariesOnBothSides) {
  std::vector<std::uint8_t> src(3 * kChecksumLeafBytes + 5), dst(src.size());
  std::vector<gpu::Segment> segs;
  append_leaves({dst.data(), src.data(), src.size()}, &segs);
  ASSERT_EQ(segs.size(), 4u);
  for (std::size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(segs[i].src, src.data() + i * kChecksumLeafBytes);
    EXPECT_EQ(segs[i].dst, dst.data() + i * kChecksumLeafBytes);
    EXPECT_EQ(segs[i].len, i < 3 ? kChecksumLeafBytes : 5u);
  }
  segs.clear();
  append_leaves({dst.data(), src.data(), kChecksumLeafBytes}, &segs);  // one leaf: itself
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].len, kChecksumLeafBytes);
}

TEST(LeafSegments, TheLeavesSumsMakeTheBlocksChecksum) {
  for (std::size_t size : {std::size_t{1000}, kChecksumLeafBytes, kChecksumLeafBytes + 1, 2 * kChecksumLeafBytes,
                           (std::size_t{1} << 20) + 100000}) {
    const auto data = store::test::random_bytes(size, size);
    std::vector<std::uint8_t> dst(size);
    std::vector<gpu::Segment> segs;
    append_leaves({dst.data(), data.data(), 100}, &segs);  // another block first: offsets matter
    const std::size_t first = segs.size();
    append_leaves({dst.data(), data.data(), size}, &segs);
    const auto sums = sums_of(segs);
    const std::vector<std::uint8_t> hashed(segs.size(), 1);
    const auto got = checksum_from_leaves(sums, hashed, first, size);
    ASSERT_TRUE(got.has_value()) << size;
    EXPECT_EQ(*got, checksum({data.data(), size})) << size;
  }
}

TEST(LeafSegments, AnUnhashedLeafOrAMissingOneLeavesTheBlockToTheCpu) {
  const std::size_t size = 3 * kChecksumLeafBytes;
  const auto data = store::test::random_bytes(size, 3);
  std::vector<std::uint8_t> dst(size);
  std::vector<gpu::Segment> segs;
  append_leaves({dst.data(), data.data(), size}, &segs);
  const auto sums = sums_of(segs);
  std::vector<std::uint8_t> hashed(segs.size(), 1);
  hashed[1] = 0;  // e.g. unaligned, or a last leaf of 240 bytes or less
  EXPECT_FALSE(checksum_from_leaves(sums, hashed, 0, size).has_value());
  hashed[1] = 1;
  EXPECT_TRUE(checksum_from_leaves(sums, hashed, 0, size).has_value());
  // The block claims more leaves than the batch holds.
  EXPECT_FALSE(checksum_from_leaves(sums, hashed, 1, size).has_value());
  EXPECT_FALSE(checksum_from_leaves(sums, hashed, 0, size + 1).has_value());
}

}  // namespace
}  // namespace ferry::xfer::gpu
