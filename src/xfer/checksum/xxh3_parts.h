#pragma once
// XXH3-64 (seed 0, default secret) of inputs longer than 240 bytes, cut into
// parts that may be computed in any order and then added up: the GPU copy kernel
// (xfer/cuda/copy_kernel.cu) hashes the bytes it moves with exactly these
// functions, and a CPU unit test (tests/xfer/store/xxh3_parts_test.cpp) checks
// them against libxxhash's XXH3_64bits: the checksum tiers store for objects up
// to one leaf, and of each leaf of a larger one (checksum.h).
//
// XXH3's long-input loop (xxhash.h, XXH3_hashLong_internal_loop), restated:
//
//   input   | block 0 (1024 B) | block 1 | ... | block nb-1 | final block (1..1024 B) |
//   block   = 16 stripes of 64 B; stripe s uses the secret from byte 8*s
//   acc[8]  = kInit
//   for each of the nb = (len-1)/1024 blocks:  acc += terms of its 16 stripes; scramble(acc)
//   final block:   acc += terms of its first ((len-1) % 1024) / 64 stripes      (no scramble)
//   last 64 bytes: acc += their terms, with the secret from byte 121           (overlaps the above)
//   hash    = avalanche(len * kP64_1 + sum over i<4 of mix(acc[2i], acc[2i+1]) with the secret from byte 11)
//
// A stripe's terms are sums (mod 2^64) over its eight u64 words w: acc[w^1] += d_w,
// acc[w] += lo32(d_w ^ key_w) * hi32(d_w ^ key_w). So a block's contribution is the
// sum of the contributions of its 64 parts of 16 bytes, in any order, and part p
// (words 2q and 2q+1 of stripe s, q = p % 4, s = p / 4) touches only acc[2q] and
// acc[2q+1]. A warp adds a block's parts in parallel and reduces with shuffles;
// only the scramble between blocks is serial. Inputs of 240 bytes or less use
// other XXH3 paths: the kernel leaves them to the CPU.

#include <cstddef>
#include <cstdint>

#include "ferry/core/host_device.h"

#if defined(__CUDACC__)
#define FERRY_UNROLL _Pragma("unroll")
#else
#define FERRY_UNROLL _Pragma("GCC unroll 8")
#endif

namespace ferry::xfer::xxh3 {

inline constexpr std::uint64_t kMinLen = 241;  // shorter inputs take XXH3's short and mid-size paths
inline constexpr std::uint64_t kBlockBytes = 1024;
inline constexpr std::uint64_t kStripeBytes = 64;
inline constexpr std::size_t kSecretBytes = 192;

inline constexpr std::uint64_t kP32_1 = 0x9E3779B1u, kP32_2 = 0x85EBCA77u, kP32_3 = 0xC2B2AE3Du;
inline constexpr std::uint64_t kP64_1 = 0x9E3779B185EBCA87ull, kP64_2 = 0xC2B2AE3D27D4EB4Full,
                               kP64_3 = 0x165667B19E3779F9ull, kP64_4 = 0x85EBCA77C2B2AE63ull,
                               kP64_5 = 0x27D4EB2F165667C5ull;

// The secret's words as the loop reads them, unpacked once (the last-stripe and
// merge offsets, 121 and 11, are not 8-byte aligned).
struct Keys {
  std::uint64_t stripe[24];  // at byte 8*i: stripe s, word w uses stripe[s + w]; the scramble uses 16..23
  std::uint64_t last[8];     // at byte 121 + 8*w: the last stripe's words
  std::uint64_t merge[8];    // at byte 11 + 8*i: the final mix
};

FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t read_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// From the 192-byte default secret (xxh3_default_secret()).
FERRY_HOST_DEVICE FERRY_FORCE_INLINE Keys make_keys(const std::uint8_t* secret) {
  Keys k{};
  for (int i = 0; i < 24; ++i) k.stripe[i] = read_le64(secret + 8 * i);
  for (int i = 0; i < 8; ++i) k.last[i] = read_le64(secret + kSecretBytes - kStripeBytes - 7 + 8 * i);
  for (int i = 0; i < 8; ++i) k.merge[i] = read_le64(secret + 11 + 8 * i);
  return k;
}

FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t init_acc(int i) {
  switch (i) {
    case 0: return kP32_3;
    case 1: return kP64_1;
    case 2: return kP64_2;
    case 3: return kP64_3;
    case 4: return kP64_4;
    case 5: return kP32_2;
    case 6: return kP64_5;
    default: return kP32_1;
  }
}

// Adds the terms of one 16-byte part (words d0 = word 2q, d1 = word 2q+1 of a
// stripe; k0, k1 their secret words) to acc[2q] (even) and acc[2q+1] (odd).
FERRY_HOST_DEVICE FERRY_FORCE_INLINE void add_part(std::uint64_t& even, std::uint64_t& odd, std::uint64_t d0,
                                                   std::uint64_t d1, std::uint64_t k0, std::uint64_t k1) {
  const std::uint64_t x0 = d0 ^ k0, x1 = d1 ^ k1;
  odd += d0;  // acc[w ^ 1] += d_w: the words of a pair swap
  even += (x0 & 0xFFFFFFFFu) * (x0 >> 32);
  even += d1;
  odd += (x1 & 0xFFFFFFFFu) * (x1 >> 32);
}

// Between blocks, per accumulator i with key stripe[16 + i].
FERRY_HOST_DEVICE FERRY_FORCE_INLINE void scramble(std::uint64_t& acc, std::uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  acc *= kP32_1;
}

// The final mix of one accumulator pair: 128-bit product folded to 64 bits.
FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t mix_pair(std::uint64_t even, std::uint64_t odd,
                                                            std::uint64_t k0, std::uint64_t k1) {
  const std::uint64_t a = even ^ k0, b = odd ^ k1;
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
#endif
}

// mixed = the sum of mix_pair over the four pairs.
FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t finish(std::uint64_t mixed, std::uint64_t len) {
  std::uint64_t h = len * kP64_1 + mixed;
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  h ^= h >> 32;
  return h;
}

// Blocks that are scrambled after their stripes; the final block, index
// scrambled_blocks(len), is never scrambled and counts final_stripes(len) stripes.
FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t scrambled_blocks(std::uint64_t len) {
  return (len - 1) / kBlockBytes;
}
FERRY_HOST_DEVICE FERRY_FORCE_INLINE unsigned final_stripes(std::uint64_t len) {
  return static_cast<unsigned>(((len - 1) % kBlockBytes) / kStripeBytes);
}
// Stripes of block b that count (16 for every block before the final one).
FERRY_HOST_DEVICE FERRY_FORCE_INLINE unsigned stripes_in_block(std::uint64_t len, std::uint64_t b) {
  return b < scrambled_blocks(len) ? 16u : final_stripes(len);
}

// The contributions to one accumulator pair (q) from part `p` (0..63) of a block;
// zero for parts of stripes that do not count.
FERRY_HOST_DEVICE FERRY_FORCE_INLINE void block_part(const std::uint8_t* block, unsigned p, unsigned stripes,
                                                     const Keys& k, std::uint64_t& even, std::uint64_t& odd) {
  const unsigned s = p / 4, q = p % 4;
  if (s >= stripes) return;
  add_part(even, odd, read_le64(block + 16 * p), read_le64(block + 16 * p + 8), k.stripe[s + 2 * q],
           k.stripe[s + 2 * q + 1]);
}

// Pair q's contribution from the last 64 bytes of the input (`tail` = data + len - 64).
FERRY_HOST_DEVICE FERRY_FORCE_INLINE void last_stripe_part(const std::uint8_t* tail, unsigned q,
                                                           const Keys& k, std::uint64_t& even,
                                                           std::uint64_t& odd) {
  add_part(even, odd, read_le64(tail + 16 * q), read_le64(tail + 16 * q + 8), k.last[2 * q], k.last[2 * q + 1]);
}

// The serial part for accumulator i alone: contribution[b][8] for blocks
// 0..scrambled_blocks(len) (the final block last), then the last stripe's
// contribution[8] -> acc[i] before the final mix. The eight accumulators' chains
// never meet before that mix, so eight GPU threads walk them side by side. The
// loads run a group of kAhead blocks ahead of the chain, so that each step waits
// on the step before it and not on memory (one thread walking every chain with a
// load per step held the copy kernel far below the link's rate: docs/bench/xfer.md).
FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t fold_accumulator(const std::uint64_t* contribution,
                                                                    std::uint64_t len, unsigned i,
                                                                    const Keys& k) {
  constexpr unsigned kAhead = 8;
  std::uint64_t acc = init_acc(static_cast<int>(i));
  const std::uint64_t key = k.stripe[16 + i];
  const std::uint64_t nb = scrambled_blocks(len);
  std::uint64_t b = 0;
  if (nb >= kAhead) {
    std::uint64_t cur[kAhead];  // blocks b .. b + kAhead - 1
FERRY_UNROLL
    for (unsigned u = 0; u < kAhead; ++u) cur[u] = contribution[8 * u + i];
    for (; b + 2 * kAhead <= nb; b += kAhead) {
      std::uint64_t next[kAhead];
FERRY_UNROLL
      for (unsigned u = 0; u < kAhead; ++u) next[u] = contribution[8 * (b + kAhead + u) + i];
FERRY_UNROLL
      for (unsigned u = 0; u < kAhead; ++u) {
        acc += cur[u];
        scramble(acc, key);
        cur[u] = next[u];
      }
    }
FERRY_UNROLL
    for (unsigned u = 0; u < kAhead; ++u) {
      acc += cur[u];
      scramble(acc, key);
    }
    b += kAhead;
  }
  for (; b < nb; ++b) {
    acc += contribution[8 * b + i];
    scramble(acc, key);
  }
  return acc + contribution[8 * nb + i] + contribution[8 * (nb + 1) + i];
}

// The hash from the eight folded accumulators.
FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t hash_from_accumulators(const std::uint64_t* acc,
                                                                          std::uint64_t len, const Keys& k) {
  std::uint64_t mixed = 0;
  for (int q = 0; q < 4; ++q) mixed += mix_pair(acc[2 * q], acc[2 * q + 1], k.merge[2 * q], k.merge[2 * q + 1]);
  return finish(mixed, len);
}

// The whole serial part on one thread (the CPU's way; the test's reference).
FERRY_HOST_DEVICE FERRY_FORCE_INLINE std::uint64_t hash_from_contributions(const std::uint64_t* contribution,
                                                                           std::uint64_t len, const Keys& k) {
  std::uint64_t acc[8];
  for (unsigned i = 0; i < 8; ++i) acc[i] = fold_accumulator(contribution, len, i, k);
  return hash_from_accumulators(acc, len, k);
}

}  // namespace ferry::xfer::xxh3

namespace ferry::xfer {
// libxxhash's 192-byte default secret (XXH3_kSecret), read from its header.
const std::uint8_t* xxh3_default_secret() noexcept;
}  // namespace ferry::xfer
