#include "xfer/store/sizes.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "ferry/core/status.h"

namespace ferry::xfer::store {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  const auto fail = [&](const std::string& why) -> std::uint64_t {
    throw Error(std::string(what) + ": '" + std::string(text) + "' " + why +
                " (write a byte count like 4096, 64K, 512MiB, 8GiB or 10GB)");
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string_view number = text.substr(0, i);
  const std::string unit = lower(text.substr(i));
  if (number.empty()) return fail("has no number");

  std::uint64_t scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  const char* prefixes = "kmgt";
  for (int p = 0; p < 4 && scale == 0; ++p) {
    const std::uint64_t binary = 1ull << (10 * (p + 1));
    const std::uint64_t decimal = static_cast<std::uint64_t>(std::pow(1000.0, p + 1));
    const std::string c(1, prefixes[p]);
    if (unit == c || unit == c + "ib") scale = binary;
    if (unit == c + "b") scale = decimal;
  }
  if (scale == 0) return fail("has an unknown unit '" + std::string(text.substr(i)) + "'");

  if (number.find('.') == std::string_view::npos) {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || end != number.data() + number.size()) return fail("is not a number");
    if (n != 0 && scale > UINT64_MAX / n) return fail("is too large");
    return n * scale;
  }
  double d = 0;
  if (std::sscanf(std::string(number).c_str(), "%lf", &d) != 1) return fail("is not a number");
  const double bytes = d * static_cast<double>(scale);
  if (!(bytes < 1.8e19)) return fail("is too large");
  if (bytes != std::floor(bytes)) return fail("is not a whole number of bytes");
  return static_cast<std::uint64_t>(bytes);
}

std::string format_size(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0 || v == std::floor(v))
    std::snprintf(buf, sizeof(buf), "%.0f%s", v, units[u]);
  else
    std::snprintf(buf, sizeof(buf), "%.3g%s", v, units[u]);
  return buf;
}

}  // namespace ferry::xfer::store
