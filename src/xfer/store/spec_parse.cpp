#include "xfer/store/spec_parse.h"

#include <charconv>

#include "ferry/core/status.h"
#include "xfer/store/sizes.h"

namespace ferry::xfer::store {

void SpecReader::fail(const std::string& why) const {
  throw Error("tier '" + std::string(spec_) + "': " + why + " (form: " + std::string(usage_) + ")");
}

long SpecReader::whole_number(std::string_view text, std::string_view what, long lo, long hi) const {
  long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    fail(std::string(what) + " '" + std::string(text) + "' is not a whole number");
  if (v < lo || v > hi)
    fail(std::string(what) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
         std::to_string(hi));
  return v;
}

std::uint64_t SpecReader::size(std::string_view text, std::string_view what, bool zero_ok) const {
  if (text.empty()) fail("no " + std::string(what) + " given");
  const std::uint64_t v = parse_size(text, "tier '" + std::string(spec_) + "' " + std::string(what));
  if (v == 0 && !zero_ok) fail(std::string(what) + " must be more than 0 bytes");
  return v;
}

bool SpecReader::yes_no(std::string_view name, std::string_view value) const {
  if (value == "yes" || value == "on" || value == "1" || value == "true") return true;
  if (value == "no" || value == "off" || value == "0" || value == "false") return false;
  fail(std::string(name) + "=" + std::string(value) + " is not yes or no");
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t next = s.find(sep, at);
    out.push_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

}  // namespace ferry::xfer::store
