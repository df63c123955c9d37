// The GPU copy kernel hashes the bytes it moves with xxh3_parts.h, cut the way a
// warp cuts them; tiers verify with libxxhash. These tests run that exact
// decomposition on the CPU and require libxxhash's XXH3_64bits for every length
// class the kernel hashes (no GPU needed, so CI proves the kernel's arithmetic).
#include <gtest/gtest.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_generateSecret_fromSeed
#include <xxhash.h>

#include <cstring>
#include <vector>

#include "xfer/store/store_test_util.h"
#include "xfer/checksum/xxh3_parts.h"

namespace ferry::xfer::store {
namespace {

// As the kernel does it: per block, lane l of a warp holds the 16-byte parts
// 32*v + l (v = 0, 1) and adds them to pair q = l % 4; the lanes of one q are
// summed (the shuffle reduction); the last stripe is pair q's lane q. Lanes run
// here in reverse order, to show the order of the sums does not matter.
std::uint64_t hash_like_a_warp(const std::uint8_t* data, std::uint64_t len, const xxh3::Keys& k) {
  const std::uint64_t nb = xxh3::scrambled_blocks(len);
  std::vector<std::uint64_t> contribution(8 * (nb + 2), 0);
  for (std::uint64_t b = 0; b <= nb; ++b) {
    // The final block may be shorter than 1024 bytes: only its counted stripes are read.
    const unsigned stripes = xxh3::stripes_in_block(len, b);
    for (int lane = 31; lane >= 0; --lane)
      for (unsigned v = 0; v < 2; ++v) {
        const unsigned p = 32 * v + static_cast<unsigned>(lane), q = p % 4;
        xxh3::block_part(data + b * xxh3::kBlockBytes, p, stripes, k, contribution[8 * b + 2 * q],
                         contribution[8 * b + 2 * q + 1]);
      }
  }
  for (unsigned q = 0; q < 4; ++q)
    xxh3::last_stripe_part(data + len - 64, q, k, contribution[8 * (nb + 1) + 2 * q],
                           contribution[8 * (nb + 1) + 2 * q + 1]);
  return xxh3::hash_from_contributions(contribution.data(), len, k);
}

TEST(Xxh3Parts, TheSecretIsLibxxhashsDefault) {
  std::uint8_t generated[xxh3::kSecretBytes];
  // Seed 0 derives the default secret unchanged.
  XXH3_generateSecret_fromSeed(generated, 0);
  EXPECT_EQ(std::memcmp(generated, xxh3_default_secret(), sizeof(generated)), 0);
}

TEST(Xxh3Parts, EqualXxh3ForEveryLengthTheKernelHashes) {
  const auto data = test::random_bytes((4 << 20) + 4096, 41);
  const xxh3::Keys k = xxh3::make_keys(xxh3_default_secret());
  std::vector<std::uint64_t> lens;
  for (std::uint64_t n = xxh3::kMinLen; n <= 2100; ++n) lens.push_back(n);  // every stripe and block edge
  for (std::uint64_t base : {4096ull, 16384ull, 65536ull, 262144ull, 1ull << 20, 4ull << 20})
    for (std::int64_t d : {-1025, -1024, -1023, -65, -64, -63, -17, -16, -15, -1, 0, 1, 15, 16, 63, 64, 1023})
      lens.push_back(static_cast<std::uint64_t>(static_cast<std::int64_t>(base) + d));
  for (std::uint64_t n : {100001ull, 999999ull, 3000017ull}) lens.push_back(n);
  for (std::uint64_t n : lens) {
    for (std::size_t offset : {0, 16, 5}) {  // the kernel hashes 16-byte aligned data; the math holds anywhere
      if (offset != 0 && n > 70000) continue;
      ASSERT_LE(n + offset, data.size());
      const std::uint8_t* p = data.data() + offset;
      ASSERT_EQ(hash_like_a_warp(p, n, k), XXH3_64bits(p, n)) << "length " << n << " at offset " << offset;
    }
  }
}

TEST(Xxh3Parts, EqualXxh3ForRepetitiveData) {
  // Zeros and a repeated byte: the products of the terms are zero or equal, a
  // different edge of the arithmetic than random data.
  const xxh3::Keys k = xxh3::make_keys(xxh3_default_secret());
  for (std::uint8_t fill : {0x00, 0xff, 0x5a}) {
    std::vector<std::uint8_t> data(70000, fill);
    for (std::uint64_t n : {241ull, 1024ull, 1025ull, 65536ull, 70000ull})
      ASSERT_EQ(hash_like_a_warp(data.data(), n, k), XXH3_64bits(data.data(), n)) << n << " of " << int(fill);
  }
}

}  // namespace
}  // namespace ferry::xfer::store
