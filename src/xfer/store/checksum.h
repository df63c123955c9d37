#pragma once
// The checksum every tier stores beside an object: XXH3-64 of its bytes (seed 0).
// The agent computes it once when the object arrives; tiers store it and verify it
// on every get, so a flipped bit on disk or in Redis is reported, never returned.

#include <cstdint>
#include <string>

#include "ferry/core/bytes.h"

namespace ferry::xfer::store {

// XXH3-64 of the bytes (0 bytes hash to a fixed value, not 0).
std::uint64_t checksum(ByteView data) noexcept;

// The same checksum over bytes that arrive in pieces (the agent hashes a large
// block piece by piece while the rest of it is still being copied).
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void update(ByteView data) noexcept;
  std::uint64_t digest() const noexcept;  // == checksum() of everything given to update()

 private:
  void* state_;  // an XXH3_state_t of the build in use
};

// Hex form for messages: "0x" and 16 digits.
std::string checksum_hex(std::uint64_t sum);

}  // namespace ferry::xfer::store
