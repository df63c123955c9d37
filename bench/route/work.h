#pragma once
// Artificial per-message memory work for the route applications, Ferry's and
// the peer libraries' alike: random reads of a table much larger than the
// caches (the application's own memory traffic, which the Buddy paper's
// memory-to-communication ratio measures against its messages).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rng.h"

namespace ferry::route::bench {

class Work {
 public:
  Work(std::uint64_t table_mib, std::uint64_t seed, std::uint64_t reads_per_message)
      : reads_(reads_per_message), state_(mix(seed)) {
    if (reads_ == 0) return;
    const std::uint64_t words = std::max<std::uint64_t>(1, table_mib) * (1 << 20) / 8;
    std::uint64_t pow2 = 1;
    while (pow2 * 2 <= words) pow2 *= 2;
    table_.resize(pow2);
    for (std::uint64_t i = 0; i < pow2; ++i) table_[i] = mix(i);  // touch every page now, not in the phase
    mask_ = pow2 - 1;
  }
  // The reads for one message; the sum keeps the compiler from dropping them.
  void run() noexcept {
    ++calls_;
    if (reads_ == 0) return;
    std::uint64_t x = state_;
    for (std::uint64_t i = 0; i < reads_; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      sink_ += table_[(x >> 20) & mask_];
    }
    state_ = x;
  }
  std::uint64_t reads() const noexcept { return reads_; }
  std::uint64_t calls() const noexcept { return calls_; }  // messages (or segments) worked for
  std::uint64_t sink() const noexcept { return sink_; }

 private:
  std::vector<std::uint64_t> table_;
  std::uint64_t mask_ = 0;
  std::uint64_t reads_;
  std::uint64_t state_;
  std::uint64_t sink_ = 0;
  std::uint64_t calls_ = 0;
};

}  // namespace ferry::route::bench
