#pragma once
// The transfer engine's vocabulary, shaped like NIXL's
// (https://github.com/ai-dynamo/nixl): memory types, operations, and data-path
// status values (0 done, 1 in progress, errors < 0).

#include <cstdint>
#include <string>

namespace ferry::xfer {

// Where a descriptor's bytes live. Dram/Vram are the application's memory; File
// and Obj are storage (a key names the object).
enum class MemType : std::uint8_t { Dram = 0, Vram = 1, Block = 2, Obj = 3, File = 4 };

// Write pushes memory to storage; Read pulls storage into memory.
enum class XferOp : std::uint8_t { Write = 0, Read = 1 };

enum class [[nodiscard]] XferStatus : std::int32_t {
  Ok = 0,
  InProgress = 1,
  NotFound = -1,          // no object under that key, in any tier
  InvalidDesc = -2,       // outside the registered range, wrong memory type, empty key ...
  ChecksumMismatch = -3,  // stored bytes fail their checksum: never returned as data
  NoSpace = -4,           // every tier that could take the object is full (disk full included)
  Unavailable = -5,       // a backend went away (Redis down): retry later
  IoError = -6,           // a read or write failed for another reason
  TooLarge = -7,          // the object does not fit the destination buffer or any tier
  Cancelled = -8,         // released or shut down before it finished
  ProtocolError = -9,     // the agent and the application disagree on the wire
  Internal = -10,
};

const char* to_string(MemType t) noexcept;
const char* to_string(XferOp op) noexcept;
const char* to_string(XferStatus s) noexcept;

constexpr bool is_error(XferStatus s) noexcept { return static_cast<std::int32_t>(s) < 0; }

}  // namespace ferry::xfer
