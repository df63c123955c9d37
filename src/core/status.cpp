#include "ferry/core/status.h"

#include <cerrno>
#include <cstring>

namespace ferry {

const char* to_string(Status s) noexcept {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::InProgress: return "in progress";
    case Status::Full: return "full";
    case Status::Empty: return "empty";
    case Status::TooLarge: return "message too large";
    case Status::Stopped: return "stopped";
    case Status::Timeout: return "timed out";
    case Status::Corrupt: return "corrupt shared structure";
    case Status::PeerGone: return "peer gone";
    case Status::IoError: return "I/O error";
  }
  return "unknown status";
}

void throw_errno(const std::string& what) {
  const int err = errno;
  throw Error(what + ": " + std::strerror(err));
}

}  // namespace ferry
