#pragma once
// Data-path status values: Ok = 0, InProgress > 0, errors < 0 (the NIXL split).
// Control-path code throws ferry::Error instead.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ferry {

enum class [[nodiscard]] Status : std::int32_t {
  Ok = 0,
  InProgress = 1,
  Full = -1,       // ring or window has no free slot: back-pressure, try later
  Empty = -2,      // nothing to consume
  TooLarge = -3,   // message exceeds the slot size
  Stopped = -4,    // a stop flag ended the wait
  Timeout = -5,    // a bounded wait ran out
  Corrupt = -6,    // a shared structure failed its magic/version/bounds check
  PeerGone = -7,   // the other process went away
  IoError = -8,
};

const char* to_string(Status s) noexcept;

constexpr bool ok(Status s) noexcept { return s == Status::Ok; }

// Control-path error with a message a user can act on.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws ferry::Error with "what: strerror(errno)" (for failed system calls at set-up).
[[noreturn]] void throw_errno(const std::string& what);

}  // namespace ferry
