#include "xfer/store/redis/redis_info.h"

namespace ferry::xfer::store {
namespace {

// A decimal number as Redis writes one: digits, no sign, no leading zero.
std::optional<std::uint64_t> parse_u64(std::string_view s) noexcept {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<unsigned>(c - '0'), &v))
      return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<RedisMemory> parse_info_memory(std::string_view info) noexcept {
  std::optional<std::uint64_t> used, max;
  while (!info.empty()) {
    const std::size_t nl = info.find('\n');
    std::string_view line = info.substr(0, nl);
    info = nl == std::string_view::npos ? std::string_view() : info.substr(nl + 1);
    if (nl != std::string_view::npos && !line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // a "# Memory" header or a blank line
    const std::string_view field = line.substr(0, colon);
    std::optional<std::uint64_t>* slot = field == "used_memory" ? &used
                                         : field == "maxmemory" ? &max
                                                                : nullptr;
    if (slot == nullptr) continue;
    if (slot->has_value()) return std::nullopt;  // given twice: not a reply to trust
    *slot = parse_u64(line.substr(colon + 1));
    if (!slot->has_value()) return std::nullopt;
  }
  if (!used || !max) return std::nullopt;
  return RedisMemory{*used, *max};
}

}  // namespace ferry::xfer::store
