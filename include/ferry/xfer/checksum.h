#pragma once
// The checksum every tier stores beside an object. The agent computes it once
// when the object arrives; tiers store it and verify it on every get, so a
// flipped bit on disk or in Redis is reported, never returned.
//
// It is a two-level XXH3-64 (seed 0), so that a large object's checksum can be
// computed in parallel pieces and does not serialise behind its copy:
//   - an object of at most kChecksumLeafBytes: XXH3-64 of its bytes;
//   - a larger one: cut into leaves of kChecksumLeafBytes (the last may be
//     shorter), then XXH3-64 of the leaves' XXH3-64s, as little-endian u64s.
// XXH3's long-input fold is a serial chain over 1 KiB blocks, so one hash over
// a large object would finish long after the GPU copy kernel's copy had ended.
// Leaves let many threads hash one object at once (docs/bench/xfer.md has the
// before and after), and objects up to 64 KiB keep the plain XXH3-64 they
// always had.
//
// Objects stored before leaves existed carry plain XXH3-64 over all their bytes
// ("whole" sums); the file and redis tiers mark which kind they stored and
// verify those with whole_checksum(). Only objects above one leaf differ.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ferry/core/bytes.h"

namespace ferry::xfer {

inline constexpr std::size_t kChecksumLeafBytes = std::size_t{64} << 10;

// The checksum described above (0 bytes hash to a fixed value, not 0).
std::uint64_t checksum(ByteView data) noexcept;

// The checksum of an object larger than one leaf, from its leaves' XXH3-64s in
// order (what a GPU kernel computes in parallel). leaf_sums.size() >= 2.
std::uint64_t combine_leaf_sums(std::span<const std::uint64_t> leaf_sums) noexcept;

// The leaves' XXH3-64s of a piece of an object that starts on a leaf boundary:
// out[i] is the sum of piece bytes [i * kChecksumLeafBytes, ...) (the last
// leaf may be shorter). Pieces hashed this way, in order, give the leaves that
// combine_leaf_sums() takes (or, for an object of one leaf, its checksum).
void leaf_checksums(ByteView piece, std::uint64_t* out) noexcept;

// Plain XXH3-64 of all the bytes: the checksum of objects stored by builds that
// predate leaves (equal to checksum() up to one leaf).
std::uint64_t whole_checksum(ByteView data) noexcept;

// The checksum of the kind an object was stored with: whole_checksum() for an
// object of an older build (whole_sum), else checksum().
std::uint64_t checksum_of_kind(ByteView data, bool whole_sum) noexcept;

// checksum() over bytes that arrive in pieces of any size (the agent hashes a
// large block piece by piece while the rest of it is still being copied).
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void update(ByteView data);
  std::uint64_t digest() const noexcept;  // == checksum() of everything given to update()

 private:
  void* state_;                        // an XXH3_state_t of the build in use: the open leaf
  std::size_t in_leaf_ = 0;            // bytes of the open leaf so far
  std::vector<std::uint64_t> leaves_;  // XXH3-64s of the full leaves so far
};

// Hex form for messages: "0x" and 16 digits.
std::string checksum_hex(std::uint64_t sum);

}  // namespace ferry::xfer
