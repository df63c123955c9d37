#include "xfer/store/file/file_names.h"

#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>

namespace ferry::xfer::store {
namespace {

bool is_safe(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == '@' || c == '=' || c == '+' || c == ',';
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string object_file_name(std::string_view key) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size() + kObjectSuffix.size());
  for (std::size_t i = 0; i < key.size() && out.size() <= kMaxEncodedName; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (is_safe(c) && !(i == 0 && c == '.')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (out.size() > kMaxEncodedName) {
    const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
    char buf[40];
    std::snprintf(buf, sizeof(buf), "~%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    out = buf;
  }
  out += kObjectSuffix;
  return out;
}

std::string temp_file_name(std::string_view name) {
  static std::atomic<std::uint64_t> counter{0};
  char buf[48];
  std::snprintf(buf, sizeof(buf), ".tmp.%d.%llu", static_cast<int>(getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1, std::memory_order_relaxed)));
  return std::string(name) + buf;
}

bool is_object_file_name(std::string_view name) {
  return ends_with(name, kObjectSuffix) && name.size() > 3;
}

std::string pack_file_name(std::uint64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "pack-%016llx", static_cast<unsigned long long>(seq));
  return std::string(buf) + std::string(kPackSuffix);
}

bool is_pack_file_name(std::string_view name, std::uint64_t* seq) {
  constexpr std::string_view kPrefix = "pack-";
  if (name.size() != kPrefix.size() + 16 + kPackSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      !ends_with(name, kPackSuffix))
    return false;
  std::uint64_t v = 0;
  for (const char c : name.substr(kPrefix.size(), 16)) {
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  if (seq != nullptr) *seq = v;
  return true;
}

bool is_temp_file_name(std::string_view name) {
  if (is_object_file_name(name)) return false;
  const auto at = name.find(".kv.tmp.");
  if (at != std::string_view::npos && at > 0) return true;
  const auto pack = name.find(".fpk.tmp.");
  if (pack != std::string_view::npos && is_pack_file_name(name.substr(0, pack + kPackSuffix.size())))
    return true;
  return name.substr(0, std::string_view(kTombstoneLogName).size() + 5) ==
         std::string(kTombstoneLogName) + ".tmp.";
}

}  // namespace ferry::xfer::store
