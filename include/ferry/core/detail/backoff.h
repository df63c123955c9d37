#pragma once
// Internal to Ferry (detail/): used by the public backend templates, not an API.
// Bounded waiting for polling loops: spin briefly (lowest latency), then yield,
// then sleep in short steps, so that an idle poller gives its core back. The
// caller checks its stop flag between calls; every wait therefore stays bounded.

#include <sched.h>
#include <time.h>

#include <cstdint>

namespace ferry {

// One spin-wait step: tells the core we are polling (frees the pipeline for the
// sibling hyperthread, and saves power), without giving up the core.
inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class Backoff {
 public:
  // spin_rounds: pause-instructions rounds before yielding; yield_rounds: sched_yield
  // calls before sleeping; sleep_ns: the sleep step once idle.
  constexpr Backoff(std::uint32_t spin_rounds = 2000, std::uint32_t yield_rounds = 200,
                    long sleep_ns = 50'000) noexcept
      : spin_rounds_(spin_rounds), yield_rounds_(yield_rounds), sleep_ns_(sleep_ns) {}

  void reset() noexcept { rounds_ = 0; }

  // One idle step; returns how idle we are (true once sleeping).
  bool idle() noexcept {
    if (rounds_ < spin_rounds_) {
      ++rounds_;
      cpu_pause();
      return false;
    }
    if (rounds_ < spin_rounds_ + yield_rounds_) {
      ++rounds_;
      sched_yield();
      return false;
    }
    timespec ts{0, sleep_ns_};
    nanosleep(&ts, nullptr);
    return true;
  }

 private:
  std::uint32_t spin_rounds_;
  std::uint32_t yield_rounds_;
  long sleep_ns_;
  std::uint32_t rounds_ = 0;
};

}  // namespace ferry
