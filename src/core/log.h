#pragma once
// Internal logging: spdlog behind a thin layer so its types stay out of the
// public headers. Levels follow DOCA's numeric scale (10 DISABLE ... 70 TRACE).

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::log {

// Maps a DOCA numeric level (10, 20, ... 70) onto spdlog; throws ferry::Error for
// anything else.
spdlog::level::level_enum from_doca_level(int level);

// Sets up the "ferry" logger (the program's own messages, --log-level) and the
// "sdk" logger (Ferry's OS, socket and CUDA plumbing, --sdk-log-level), both on
// stderr, tagged with the role name.
void init(const char* role, int log_level, int sdk_log_level);

spdlog::logger& app();
spdlog::logger& sdk();

// Lets one of a repeated message through per interval and counts the rest, so
// that a condition met in a loop (out of file descriptors, a peer that keeps
// failing) cannot flood the log. Thread-safe.
class Throttle {
 public:
  explicit Throttle(std::chrono::milliseconds every = std::chrono::seconds(1)) : every_ns_(every.count() * 1000000) {}
  // -1: hold this one back. Otherwise log it, adding how many were held back
  // since the last one let through (suppressed_note() words that).
  long long pass() noexcept;

 private:
  std::int64_t every_ns_;
  std::atomic<std::int64_t> next_ns_{0};
  std::atomic<long long> held_{0};
};

// " (N similar messages suppressed)", or "" for 0: appended to a throttled line.
std::string suppressed_note(long long held);

// Text from a peer (an application's name, a key) fit for one log line: bytes
// outside printable ASCII become \xNN, and it is cut at max_len with "...".
std::string printable(std::string_view text, std::size_t max_len = 128);

}  // namespace ferry::log
