#pragma once
// The memory figures of a Redis server's "INFO memory" reply, which the redis
// tier reports as its capacity (an application sizes its cache by it, as
// LMCache's max_capacity_gb). The reply is text from a peer: lines
// "field:value", ended by CRLF, with "# Section" headers between.

#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry::xfer::store {

struct RedisMemory {
  std::uint64_t used = 0;  // used_memory: every byte Redis has allocated, its own overhead included
  std::uint64_t max = 0;   // maxmemory: the bound Redis enforces; 0 when it has none
};

// used_memory and maxmemory from the reply; nullopt when either is missing, not
// a plain decimal number (no sign, no leading zero), out of 64-bit range, or
// given twice. Lines end in LF or CRLF.
std::optional<RedisMemory> parse_info_memory(std::string_view info) noexcept;

}  // namespace ferry::xfer::store
