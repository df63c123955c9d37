#include "xfer/base/fault.h"

#include "core/log.h"

namespace ferry::xfer {
namespace {

// What the application asked for wrongly is its own business: logged for
// debugging, not as the agent's warning.
bool caused_by_application(XferStatus s) noexcept {
  return s == XferStatus::NotFound || s == XferStatus::TooLarge || s == XferStatus::InvalidDesc;
}

}  // namespace

XferStatus Fault::raise(XferStatus status, std::string detail, std::string_view key) noexcept {
  if (caused_by_application(status))
    log::app().debug("{}: {}", to_string(status), detail);
  else
    log::app().warn("{}: {}", to_string(status), detail);
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
