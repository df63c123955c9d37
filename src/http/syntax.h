#pragma once
// The character classes and small field-value rules of RFC 9110/9112, shared by
// the proxy's message scan (host) and the workers' request parser (host and GPU).

#include <cstddef>
#include <cstdint>

#include "ferry/core/host_device.h"

#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

namespace ferry::http {

// A status code with a short reason for the log (never null).
struct Verdict {
  std::uint16_t status = 200;
  const char* why = "";
};

namespace syntax {

// tchar (RFC 9110 §5.6.2): the characters of a token.
FERRY_HOST_DEVICE constexpr bool is_tchar_slow(std::uint8_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~': return true;
    default: return false;
  }
}

#if !defined(__CUDA_ARCH__)
// On the CPU a table: one load instead of a chain of compares, per byte of
// every method and field name.
struct TcharTable {
  bool yes[256] = {};
  constexpr TcharTable() {
    for (int c = 0; c < 256; ++c) yes[c] = is_tchar_slow(static_cast<std::uint8_t>(c));
  }
};
inline constexpr TcharTable kTchar{};
#endif

FERRY_HOST_DEVICE inline bool is_tchar(std::uint8_t c) {
#if defined(__CUDA_ARCH__)
  return is_tchar_slow(c);
#else
  return kTchar.yes[c];
#endif
}

// field-vchar, SP or HTAB: what a field value may hold (obs-text included).
FERRY_HOST_DEVICE inline bool is_field_char(std::uint8_t c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

FERRY_HOST_DEVICE inline bool is_ows(std::uint8_t c) { return c == ' ' || c == '\t'; }

FERRY_HOST_DEVICE inline std::uint8_t lower(std::uint8_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Case-insensitive comparison of [p, p+n) with a lower-case literal.
FERRY_HOST_DEVICE inline bool iequals(const std::uint8_t* p, std::size_t n, const char* lit) {
  std::size_t i = 0;
  for (; i < n; ++i)
    if (lit[i] == '\0' || lower(p[i]) != static_cast<std::uint8_t>(lit[i])) return false;
  return lit[i] == '\0';
}

// Whether [p, p+n) starts with a lower-case literal, case-insensitively.
FERRY_HOST_DEVICE inline bool istarts_with(const std::uint8_t* p, std::size_t n, const char* lit) {
  std::size_t i = 0;
  for (; lit[i] != '\0'; ++i)
    if (i >= n || lower(p[i]) != static_cast<std::uint8_t>(lit[i])) return false;
  return true;
}

FERRY_HOST_DEVICE inline bool equals(const std::uint8_t* p, std::size_t n, const char* lit) {
  std::size_t i = 0;
  for (; i < n; ++i)
    if (lit[i] == '\0' || p[i] != static_cast<std::uint8_t>(lit[i])) return false;
  return lit[i] == '\0';
}

// The index of the next LF at or after `from`, or `end` when there is none.
FERRY_HOST_DEVICE inline std::size_t find_lf(const std::uint8_t* p, std::size_t from, std::size_t end) {
#if defined(__CUDA_ARCH__)
  for (std::size_t i = from; i < end; ++i)
    if (p[i] == '\n') return i;
  return end;
#else
  if (from >= end) return end;
  const void* lf = std::memchr(p + from, '\n', end - from);  // vectorised by the C library
  return lf == nullptr ? end : static_cast<std::size_t>(static_cast<const std::uint8_t*>(lf) - p);
#endif
}

// Whether every byte of [p, p+n) may stand in a field value (is_field_char).
// On the CPU eight bytes at a time: a word with no byte below 0x20 and none
// equal to 0x7f needs no closer look (bytes from 0x80 up, obs-text, pass).
FERRY_HOST_DEVICE inline bool all_field_chars(const std::uint8_t* p, std::size_t n) {
  std::size_t i = 0;
#if !defined(__CUDA_ARCH__)
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  constexpr std::uint64_t kHighs = 0x8080808080808080ull;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    const std::uint64_t below_space = (w - kOnes * 0x20) & ~w & kHighs;
    const std::uint64_t x = w ^ (kOnes * 0x7f);
    const std::uint64_t del = (x - kOnes) & ~x & kHighs;
    if ((below_space | del) != 0) break;  // a tab, or a byte to refuse: byte by byte from here
  }
#endif
  for (; i < n; ++i)
    if (!is_field_char(p[i])) return false;
  return true;
}

// A line [begin, lf) without its CR, if it has one.
FERRY_HOST_DEVICE inline std::size_t line_end(const std::uint8_t* p, std::size_t begin, std::size_t lf) {
  return (lf > begin && p[lf - 1] == '\r') ? lf - 1 : lf;
}

// One field line "name: value" split, value without OWS; false when malformed
// (no colon, an empty or non-token name, whitespace before the colon, a
// character a value may not hold, such as NUL or a bare CR).
struct Field {
  std::size_t name = 0, name_len = 0, value = 0, value_len = 0;
};
FERRY_HOST_DEVICE inline bool split_field(const std::uint8_t* p, std::size_t begin, std::size_t end, Field* f) {
  std::size_t i = begin;
  while (i < end && is_tchar(p[i])) ++i;
  if (i == begin || i == end || p[i] != ':') return false;
  f->name = begin;
  f->name_len = i - begin;
  std::size_t v = i + 1;
  while (v < end && is_ows(p[v])) ++v;
  std::size_t e = end;
  while (e > v && is_ows(p[e - 1])) --e;
  if (!all_field_chars(p + v, e - v)) return false;
  f->value = v;
  f->value_len = e - v;
  return true;
}

// 1*DIGIT as a number; false for anything else or a value over max.
FERRY_HOST_DEVICE inline bool parse_decimal(const std::uint8_t* p, std::size_t n, std::uint64_t max,
                                            std::uint64_t* out) {
  if (n == 0) return false;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    const std::uint64_t d = p[i] - '0';
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// What a Host field value may hold (RFC 9110 §7.2, RFC 3986 §3.2.2): a
// reg-name, IPv4 address or bracketed IP literal, and an optional ":port".
FERRY_HOST_DEVICE inline bool is_host_char(std::uint8_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '-': case '.': case '_': case '~': case '%': case '!': case '$': case '&': case '\'': case '(':
    case ')': case '*': case '+': case ',': case ';': case '=': case ':': case '[': case ']': return true;
    default: return false;
  }
}

FERRY_HOST_DEVICE inline int hex_value(std::uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace syntax
}  // namespace ferry::http
