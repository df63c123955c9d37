#pragma once
// The data path's one error convention (docs/xfer.md, "Errors"):
// - a function on the data path is noexcept and returns an XferStatus (which is
//   [[nodiscard]]); per item, a status is all a batch carries;
// - the text that explains a failure is composed once, where the failure starts,
//   logged there, and recorded in the caller's Fault. The first error wins: a
//   job reports the cause, not the failures that followed from it;
// - exceptions stay for set-up (constructors, option parsing).
//
// A Fault belongs to one job (or one call outside a job) and may be raised from
// several threads at once (the file tier splits a call between threads).

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "ferry/xfer/types.h"

namespace ferry::xfer {

class Fault {
 public:
  Fault() = default;
  Fault(const Fault&) = delete;
  Fault& operator=(const Fault&) = delete;

  // Logs `detail` (a warning, or debug for what the application caused:
  // NotFound, TooLarge, InvalidDesc) and records it unless an error is already
  // recorded. `key`: the object that failed, when one item failed rather than
  // the whole call (the API edge gives the detail to that key's result, and a
  // short phrase to the others). Returns `status`, so that a failing function
  // can `return fault.raise(...)`.
  XferStatus raise(XferStatus status, std::string detail, std::string_view key = {}) noexcept;

  bool failed() const noexcept;
  XferStatus status() const noexcept;  // Ok while nothing failed
  std::string detail() const;          // empty while nothing failed
  std::string key() const;             // empty unless the first error named one

 private:
  mutable std::mutex mu_;  // taken only on the error path and by readers
  XferStatus status_ = XferStatus::Ok;
  std::string detail_;
  std::string key_;
};

}  // namespace ferry::xfer
