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

// Hex form for messages: "0x" and 16 digits.
std::string checksum_hex(std::uint64_t sum);

}  // namespace ferry::xfer::store
