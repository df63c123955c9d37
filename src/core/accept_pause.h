#pragma once
// When accept() fails for lack of descriptors or memory, the listener stays
// readable: accepting again at once would spin a core and flood the log. A
// service therefore stops watching its listener for a while, 50 ms doubling up
// to 2 s while the failures go on, and serves the peers it already has. The
// first accept that succeeds resets the pause.

#include <algorithm>
#include <chrono>

namespace ferry {

class AcceptPause {
 public:
  using Clock = std::chrono::steady_clock;

  // Records a failed accept at `now`; returns how long the listener is off.
  std::chrono::milliseconds on_failure(Clock::time_point now) noexcept {
    pause_ = pause_.count() == 0 ? kFirst : std::min(2 * pause_, kLongest);
    until_ = now + pause_;
    return pause_;
  }
  void on_success() noexcept { pause_ = std::chrono::milliseconds(0); }

  // True while the listener should stay unwatched.
  bool paused(Clock::time_point now) const noexcept { return now < until_; }
  // Milliseconds until the pause ends (0 when not paused), for a poll timeout.
  int ms_left(Clock::time_point now) const noexcept {
    if (now >= until_) return 0;
    return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until_ - now).count());
  }

 private:
  static constexpr std::chrono::milliseconds kFirst{50};
  static constexpr std::chrono::milliseconds kLongest{2000};
  std::chrono::milliseconds pause_{0};
  Clock::time_point until_{};
};

}  // namespace ferry
