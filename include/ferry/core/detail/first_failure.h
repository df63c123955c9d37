#pragma once
// Internal to Ferry (detail/): used by the public backend templates, not an API.
// The first failure a set of threads reports, kept (sticky) and readable from
// any thread without a lock: the first reporter writes the text, then publishes it.

#include <atomic>
#include <string>

namespace ferry {

class FirstFailure {
 public:
  // Keeps `why` if nothing was reported before; later reports are dropped.
  void set(const std::string& why) {
    bool expected = false;
    if (claimed_.compare_exchange_strong(expected, true)) {
      text_ = why;
      published_.store(true, std::memory_order_release);
    }
  }
  bool failed() const { return published_.load(std::memory_order_acquire); }
  // The first report, or empty.
  std::string get() const { return failed() ? text_ : std::string(); }

 private:
  std::atomic<bool> claimed_{false};
  std::atomic<bool> published_{false};
  std::string text_;  // written once, before published_ is released
};

}  // namespace ferry
