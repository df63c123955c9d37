// The checksum is XXH3-64 whichever build computes it (AVX2 where the CPU has
// it, the library's otherwise): objects stored by one agent verify in another.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>

#include "xfer/store/checksum.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

TEST(Checksum, EqualsTheLibrarysXxh3ForEverySizeClass) {
  const auto data = test::random_bytes(3 << 20, 17);
  for (std::size_t n : {0, 1, 3, 16, 17, 128, 129, 240, 241, 1024, 4095, 65536, 100001, 3 << 20}) {
    for (std::size_t offset : {0, 1, 7}) {  // unaligned starts too
      if (n + offset > data.size()) continue;
      EXPECT_EQ(checksum({data.data() + offset, n}), XXH3_64bits(data.data() + offset, n)) << n << "+" << offset;
    }
  }
}

TEST(Checksum, AStreamInPiecesEqualsTheOneShotChecksum) {
  const auto data = test::random_bytes(5 << 20, 23);
  for (std::size_t piece : {std::size_t{1} << 20, std::size_t{4096} + 3, std::size_t{5} << 20}) {
    ChecksumStream s;
    for (std::size_t off = 0; off < data.size(); off += piece)
      s.update({data.data() + off, std::min(piece, data.size() - off)});
    EXPECT_EQ(s.digest(), checksum({data.data(), data.size()})) << piece;
  }
}

TEST(Checksum, FormatsAsSixteenHexDigits) { EXPECT_EQ(checksum_hex(0xabc), "0x0000000000000abc"); }

}  // namespace
}  // namespace ferry::xfer::store
