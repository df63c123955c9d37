#pragma once
// UTF-8 decoding that accepts any bytes, and encoding, for the tokenizer.

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry::infer::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at s[i] and advances i past it. An invalid sequence
// (bad lead byte, missing or bad continuation, overlong form, surrogate, past
// U+10FFFF, cut off at the end) reads as U+FFFD and consumes only its lead
// byte, so that the valid text after it is read as it is. i < s.size().
inline char32_t decode_utf8(std::string_view s, std::size_t& i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  std::size_t len;
  char32_t cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    ++i;  // a continuation byte, C0/C1 (always overlong) or F5..FF
    return kReplacementChar;
  }
  if (s.size() - i < len) {
    ++i;
    return kReplacementChar;
  }
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return kReplacementChar;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return kReplacementChar;
  }
  i += len;
  return cp;
}

// Appends cp (a Unicode scalar value) to out as UTF-8.
inline void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// True for the first byte of a code point in valid UTF-8.
inline bool is_utf8_lead(char c) noexcept {
  return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
}

}  // namespace ferry::infer::text
