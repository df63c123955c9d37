#pragma once
// A mutex for critical sections of a few hundred nanoseconds that several
// threads enter hundreds of thousands of times a second (the agent's tier
// indexes and pool allocator, under its copy lanes). A contended std::mutex
// parks the loser in the kernel and the wake-up costs microseconds, longer than
// the section itself; this one waits with Backoff (spin, then yield, then short
// sleeps) instead. Meets Lockable, so std::lock_guard and std::scoped_lock work.

#include <atomic>

#include "ferry/core/detail/backoff.h"

namespace ferry {

class SpinMutex {
 public:
  void lock() noexcept {
    Backoff backoff(256, 1000, 20'000);
    // The test-and-test-and-set form: waiters read the line (shared) instead of
    // writing it, so they do not bounce it between cores while the owner works.
    while (locked_.exchange(true, std::memory_order_acquire))
      while (locked_.load(std::memory_order_relaxed)) backoff.idle();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  // The release pairs with the next owner's acquire exchange: everything done
  // inside the section is visible to it.
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace ferry
