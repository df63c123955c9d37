#include "ferry/xfer/fault.h"

#include "core/log.h"

namespace ferry::xfer {
namespace {

// What the application asked for wrongly is its own business: logged for
// debugging, not as the agent's warning.
bool caused_by_application(XferStatus s) noexcept {
  return s == XferStatus::NotFound || s == XferStatus::TooLarge || s == XferStatus::InvalidDesc;
}

// A backend that stays down (Redis gone) fails every call of every session:
// one warning a second per status, noting how many were held back, instead of
// a line per call. Each failure still reaches its application in full.
log::Throttle& warnings_of(XferStatus status) noexcept {
  static log::Throttle throttles[16];
  const auto i = static_cast<std::size_t>(-static_cast<int>(status));
  return throttles[i < 16 ? i : 0];
}

}  // namespace

XferStatus Fault::raise(XferStatus status, std::string detail, std::string_view key) noexcept {
  if (caused_by_application(status))
    log::app().debug("{}: {}", to_string(status), detail);
  else if (const long long held = warnings_of(status).pass(); held >= 0)
    log::app().warn("{}: {}{}", to_string(status), detail, log::suppressed_note(held));
  std::lock_guard lk(mu_);
  if (status_ == XferStatus::Ok) {
    status_ = status;
    detail_ = std::move(detail);
    key_ = key;
  }
  return status;
}

bool Fault::failed() const noexcept { return status() != XferStatus::Ok; }

XferStatus Fault::status() const noexcept {
  std::lock_guard lk(mu_);
  return status_;
}

std::string Fault::detail() const {
  std::lock_guard lk(mu_);
  return detail_;
}

std::string Fault::key() const {
  std::lock_guard lk(mu_);
  return key_;
}

}  // namespace ferry::xfer
