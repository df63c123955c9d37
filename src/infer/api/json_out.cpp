#include "infer/api/json_out.h"

#include <charconv>
#include <cmath>
#include <type_traits>

#include "infer/api/text_codec.h"

namespace ferry::infer::api {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// The escape for byte c, or nullptr where c goes out as itself.
const char* short_escape(unsigned char c) noexcept {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

// Writes v in [dst, end) and returns where it stopped. The callers give room
// for the longest form of T: 15 characters for a float, 24 for a double, 20
// for a size_t, so to_chars cannot run out.
template <typename T>
char* put_number(char* dst, char* end, T v) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      *dst = '0';
      return dst + 1;
    }
  }
  return std::to_chars(dst, end, v).ptr;
}

template <typename T>
void append_number(std::string& out, T v) {
  char buf[32];
  out.append(buf, put_number(buf, buf + sizeof buf, v));
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out.reserve(out.size() + s.size() + 2);
  out.push_back('"');
  std::size_t i = 0;
  while (i < s.size()) {
    // Copy the run of bytes that need no escape in one append.
    std::size_t run = i;
    while (run < s.size()) {
      const auto c = static_cast<unsigned char>(s[run]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++run;
    }
    out.append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;

    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence_length(s.substr(i));
      if (n == 0) {
        out.append("\\ufffd");  // never let a stray byte make the document invalid
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
    } else if (const char* e = short_escape(c)) {
      out.append(e);
      ++i;
    } else {
      const char u[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(u, sizeof u);
      ++i;
    }
  }
  out.push_back('"');
}

void append_json_number(std::string& out, float v) {
  append_number(out, v);
}
void append_json_number(std::string& out, double v) {
  append_number(out, v);
}
void append_json_number(std::string& out, std::size_t v) {
  append_number(out, v);
}

void append_json_floats(std::string& out, std::span<const float> v) {
  // Grow once for the worst case and write in place, then cut back: one
  // allocation per vector instead of a check per element.
  const std::size_t at = out.size();
  out.resize(at + 2 + v.size() * kMaxFloatChars);
  char* const begin = out.data() + at;
  char* const end = out.data() + out.size();
  char* dst = begin;
  *dst++ = '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) *dst++ = ',';
    dst = put_number(dst, end, v[i]);
  }
  *dst++ = ']';
  out.resize(at + static_cast<std::size_t>(dst - begin));
}

}  // namespace ferry::infer::api
