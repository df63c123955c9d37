// The checksum is defined in checksum.h from plain XXH3-64 (libxxhash's): these
// tests rebuild that definition with the library and require every build of it
// (AVX2 or not, one shot or streamed) to give the same value, so objects stored
// by one agent verify in another and the GPU's leaves combine to the CPU's sum.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>

#include "ferry/xfer/checksum.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

// checksum.h's definition, spelled out with the library.
std::uint64_t reference(const std::uint8_t* p, std::size_t n) {
  if (n <= kChecksumLeafBytes) return XXH3_64bits(p, n);
  std::vector<std::uint64_t> leaves;
  for (std::size_t at = 0; at < n; at += kChecksumLeafBytes)
    leaves.push_back(XXH3_64bits(p + at, std::min(kChecksumLeafBytes, n - at)));
  return XXH3_64bits(leaves.data(), leaves.size() * sizeof(std::uint64_t));
}

constexpr std::size_t kLeaf = kChecksumLeafBytes;

TEST(Checksum, UpToOneLeafIsTheLibrarysXxh3) {
  const auto data = test::random_bytes(kLeaf + 8, 17);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{16}, std::size_t{17},
                        std::size_t{128}, std::size_t{129}, std::size_t{240}, std::size_t{241}, std::size_t{1024},
                        std::size_t{4095}, kLeaf - 1, kLeaf}) {
    for (std::size_t offset : {0, 1, 7}) {  // unaligned starts too
      EXPECT_EQ(checksum({data.data() + offset, n}), XXH3_64bits(data.data() + offset, n)) << n << "+" << offset;
      EXPECT_EQ(whole_checksum({data.data() + offset, n}), checksum({data.data() + offset, n})) << n;
    }
  }
}

TEST(Checksum, AboveOneLeafIsTheXxh3OfTheLeavesXxh3s) {
  const auto data = test::random_bytes((3 << 20) + 8, 19);
  for (std::size_t n : {kLeaf + 1, 2 * kLeaf, 2 * kLeaf + 240, std::size_t{100001}, std::size_t{3} << 20}) {
    for (std::size_t offset : {0, 5}) {
      const ByteView bytes{data.data() + offset, n};
      EXPECT_EQ(checksum(bytes), reference(bytes.data, n)) << n << "+" << offset;
      // It is a different number from the whole-object XXH3 of older builds.
      EXPECT_NE(checksum(bytes), whole_checksum(bytes)) << n;
      EXPECT_EQ(whole_checksum(bytes), XXH3_64bits(bytes.data, n)) << n;
    }
  }
}

TEST(Checksum, AboveTheStackLimitOfLeaves) {  // more than 1024 leaves: the heap path
  const auto data = test::random_bytes(1025 * kLeaf + 3, 29);
  EXPECT_EQ(checksum({data.data(), data.size()}), reference(data.data(), data.size()));
  ChecksumStream s;
  s.update({data.data(), data.size() - 100});
  s.update({data.data() + data.size() - 100, 100});
  EXPECT_EQ(s.digest(), reference(data.data(), data.size()));
}

TEST(Checksum, CombiningLeafSumsMatchesTheOneShot) {
  const auto data = test::random_bytes(5 * kLeaf + 999, 31);
  std::vector<std::uint64_t> leaves;
  for (std::size_t at = 0; at < data.size(); at += kLeaf)
    leaves.push_back(checksum({data.data() + at, std::min(kLeaf, data.size() - at)}));
  EXPECT_EQ(combine_leaf_sums(leaves), checksum({data.data(), data.size()}));
}

TEST(Checksum, TheStoredKindChoosesTheFunction) {
  const auto data = test::random_bytes(3 * kLeaf, 37);
  const ByteView bytes{data.data(), data.size()};
  EXPECT_EQ(checksum_of_kind(bytes, false), checksum(bytes));
  EXPECT_EQ(checksum_of_kind(bytes, true), whole_checksum(bytes));
}

TEST(Checksum, AStreamInPiecesEqualsTheOneShotChecksum) {
  const auto data = test::random_bytes(5 << 20, 23);
  for (std::size_t total : {std::size_t{0}, std::size_t{100}, kLeaf, kLeaf + 1, std::size_t{5} << 20}) {
    for (std::size_t piece : {std::size_t{1} << 20, std::size_t{4096} + 3, kLeaf, kLeaf + 1, kLeaf - 1,
                              std::size_t{5} << 20, std::size_t{77}}) {
      if (piece == 77 && total > 2 * kLeaf) continue;  // byte-sized pieces: keep it short
      ChecksumStream s;
      for (std::size_t off = 0; off < total; off += piece) s.update({data.data() + off, std::min(piece, total - off)});
      EXPECT_EQ(s.digest(), checksum({data.data(), total})) << total << " in " << piece;
      EXPECT_EQ(s.digest(), checksum({data.data(), total})) << "digest twice: " << total << " in " << piece;
    }
  }
}

TEST(Checksum, FormatsAsSixteenHexDigits) { EXPECT_EQ(checksum_hex(0xabc), "0x0000000000000abc"); }

}  // namespace
}  // namespace ferry::xfer::store
