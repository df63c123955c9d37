#include "xfer/store/file_names.h"

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

bool is_temp_file_name(std::string_view name) {
  if (is_object_file_name(name)) return false;
  const auto at = name.find(".kv.tmp.");
  return at != std::string_view::npos && at > 0;
}

}  // namespace ferry::xfer::store
