#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <memory>
#include <string>

#include "ferry/core/status.h"

namespace ferry::log {
namespace {

std::shared_ptr<spdlog::logger> make(const std::string& name) {
  auto existing = spdlog::get(name);
  if (existing) return existing;
  return spdlog::stderr_color_mt(name);
}

}  // namespace

spdlog::level::level_enum from_doca_level(int level) {
  switch (level) {
    case 10: return spdlog::level::off;
    case 20: return spdlog::level::critical;
    case 30: return spdlog::level::err;
    case 40: return spdlog::level::warn;
    case 50: return spdlog::level::info;
    case 60: return spdlog::level::debug;
    case 70: return spdlog::level::trace;
    default:
      throw Error("log level " + std::to_string(level) +
                  " is not one of 10 DISABLE, 20 CRITICAL, 30 ERROR, 40 WARNING, 50 INFO, "
                  "60 DEBUG, 70 TRACE");
  }
}

void init(const char* role, int log_level, int sdk_log_level) {
  const std::string pattern = std::string("[%H:%M:%S.%e] [") + role + "] [%n] [%^%l%$] %v";
  auto a = make("ferry");
  auto s = make("sdk");
  a->set_pattern(pattern);
  s->set_pattern(pattern);
  a->set_level(from_doca_level(log_level));
  s->set_level(from_doca_level(sdk_log_level));
  a->flush_on(spdlog::level::warn);
  s->flush_on(spdlog::level::warn);
}

spdlog::logger& app() {
  static auto logger = make("ferry");
  return *logger;
}

spdlog::logger& sdk() {
  static auto logger = make("sdk");
  return *logger;
}

long long Throttle::pass() noexcept {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t next = next_ns_.load(std::memory_order_relaxed);
  // Only the thread that moves the deadline logs; the rest are counted.
  if (now >= next && next_ns_.compare_exchange_strong(next, now + every_ns_, std::memory_order_relaxed))
    return held_.exchange(0, std::memory_order_relaxed);
  held_.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

std::string suppressed_note(long long held) {
  if (held <= 0) return "";
  return " (" + std::to_string(held) + " similar message" + (held == 1 ? "" : "s") + " suppressed)";
}

std::string printable(std::string_view text, std::size_t max_len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(text.size(), max_len) + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == max_len) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace ferry::log
