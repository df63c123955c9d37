#pragma once
// The check word a ring's producer writes after a short payload when the ring
// asks for it (kRingCheckWords, slot_ring.h).
//
// Why: a consumer across PCIe (the persistent GPU kernel) may read a slot only
// after its acquire of the slot's seq has seen it published, so a lone request
// costs two round trips, the poll and then the payload. With a check word it
// reads the payload and cookie together with the poll, before it knows the
// slot is published, and keeps what it read only when the check word matches
// the seq, len and cookie it then sees: one round trip (docs/bench/launch.md).
//
// The word hashes the seq, the len, the cookie and the payload's 8-byte words
// (bytes at and past len read as zero). Each word is mixed with its place and
// the terms are summed, so that a warp's lanes can each take one word and add
// up. A read that mixed old and new bytes, or read a stale message of the same
// slot (whose word was made with another seq), passes with a chance of about
// 2^-64.

#include <cstdint>
#include <cstring>

#include "ferry/core/host_device.h"

namespace ferry {

// Payloads of up to this many bytes get a check word: with the word after them
// they fit in 128 bytes, which a warp reads at once, one word a lane.
inline constexpr std::uint32_t kCheckedPayloadMax = 120;

// Where the word goes: the first 8-byte boundary at or after the payload.
FERRY_HOST_DEVICE inline std::uint32_t check_word_offset(std::uint32_t len) { return (len + 7u) & ~7u; }

// Whether a payload of len bytes gets a check word in slots of slot_size bytes.
FERRY_HOST_DEVICE inline bool has_check_word(std::uint32_t len, std::uint32_t slot_size) {
  return len <= kCheckedPayloadMax && check_word_offset(len) + 8u <= slot_size;
}

// splitmix64's finaliser: every input bit moves every output bit.
FERRY_HOST_DEVICE inline std::uint64_t check_mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The term of the payload's word j (bytes 8j to 8j + 7, little-endian), with
// the bytes at and past len zeroed. One multiply: a term per word must be cheap
// on the producer, and the final mix below spreads the sum.
FERRY_HOST_DEVICE inline std::uint64_t check_term(std::uint64_t word, std::uint32_t j, std::uint32_t len) {
  const std::uint32_t valid = len - 8u * j;  // callers pass j < check_word_offset(len) / 8, so valid >= 1
  if (valid < 8u) word &= (std::uint64_t{1} << (8u * valid)) - 1u;
  return (word ^ (0x9e3779b97f4a7c15ull * (j + 1u))) * 0xd6e8feb86659fd93ull;
}

// The check word of a message, from the sum of its payload words' terms.
FERRY_HOST_DEVICE inline std::uint64_t check_word(std::uint64_t term_sum, std::uint32_t seq, std::uint32_t len,
                                                  std::uint64_t cookie) {
  const std::uint64_t header = (std::uint64_t{len} << 32) | seq;
  return check_mix(term_sum + check_mix(header ^ 0x2545f4914f6cdd1dull) + check_mix(cookie));
}

// The check word of the payload at p (len bytes; the bytes past it up to the
// word boundary may be anything).
inline std::uint64_t compute_check_word(const std::uint8_t* p, std::uint32_t len, std::uint32_t seq,
                                        std::uint64_t cookie) {
  std::uint64_t sum = 0;
  const std::uint32_t whole = len / 8u;
  for (std::uint32_t j = 0; j < whole; ++j) {  // fixed-size copies: plain loads
    std::uint64_t w;
    std::memcpy(&w, p + 8u * j, 8);
    sum += check_term(w, j, len);
  }
  if (len % 8u != 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + 8u * whole, len % 8u);
    sum += check_term(w, whole, len);
  }
  return check_word(sum, seq, len, cookie);
}

}  // namespace ferry
