#include "infer/api/text_codec.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace ferry::infer::api {

namespace {

constexpr bool in(unsigned char c, unsigned char lo, unsigned char hi) noexcept {
  return c >= lo && c <= hi;
}

// -1 where c is not a hex digit.
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::size_t utf8_sequence_length(std::string_view s) noexcept {
  if (s.empty()) return 0;
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  // The second byte's range depends on the lead: that is where RFC 3629's
  // table rules out overlongs (E0, F0), surrogates (ED) and > U+10FFFF (F4).
  unsigned char lo = 0x80, hi = 0xBF;
  std::size_t n = 0;
  if (in(lead, 0xC2, 0xDF)) {
    n = 2;
  } else if (in(lead, 0xE0, 0xEF)) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (in(lead, 0xF0, 0xF4)) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;  // a continuation byte, C0/C1 (always overlong) or F5..FF
  }
  if (s.size() < n || !in(b(1), lo, hi)) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (!in(b(i), 0x80, 0xBF)) return 0;
  return n;
}

bool is_valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    // Most text is ASCII: skip eight bytes at a time while no high bit is set.
    while (i + 8 <= s.size()) {
      std::uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const std::size_t n = utf8_sequence_length(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool form_decode(std::string_view in, std::string& out) {
  out.reserve(out.size() + in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c != '%') {
      out.push_back(c);
    } else {
      if (in.size() - i < 3) return false;  // "%" or "%4" at the end
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
  }
  return true;
}

void append_base64_f32(std::string& out, std::span<const float> v) {
  const std::size_t bytes = v.size() * 4;
  const std::size_t at = out.size();
  out.resize(at + base64_length(bytes));
  char* dst = out.data() + at;

  // Byte k of the little-endian stream: byte k % 4 of float k / 4.
  const auto byte = [&](std::size_t k) -> std::uint32_t {
    std::uint32_t word = std::bit_cast<std::uint32_t>(v[k / 4]);
    return (word >> (8 * (k % 4))) & 0xFF;  // shifts read the value, so the host's order never shows
  };
  std::size_t k = 0;
  for (; k + 3 <= bytes; k += 3) {
    const std::uint32_t triple = byte(k) << 16 | byte(k + 1) << 8 | byte(k + 2);
    *dst++ = kBase64[(triple >> 18) & 63];
    *dst++ = kBase64[(triple >> 12) & 63];
    *dst++ = kBase64[(triple >> 6) & 63];
    *dst++ = kBase64[triple & 63];
  }
  const std::size_t rest = bytes - k;
  if (rest > 0) {
    const std::uint32_t triple = byte(k) << 16 | (rest == 2 ? byte(k + 1) << 8 : 0);
    *dst++ = kBase64[(triple >> 18) & 63];
    *dst++ = kBase64[(triple >> 12) & 63];
    *dst++ = rest == 2 ? kBase64[(triple >> 6) & 63] : '=';
    *dst++ = '=';
  }
}

}  // namespace ferry::infer::api
