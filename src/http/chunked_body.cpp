#include "http/chunked_body.h"

namespace ferry::http {
namespace {

int hex_value(std::uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The position after the next CRLF from i, or size + 1 when there is none.
std::size_t after_line(const std::uint8_t* p, std::size_t size, std::size_t i) {
  for (; i + 1 < size; ++i)
    if (p[i] == '\r' && p[i + 1] == '\n') return i + 2;
  return size + 1;
}

}  // namespace

bool decode_chunked_body(const std::uint8_t* p, std::size_t size, std::string& out) {
  out.clear();
  std::size_t i = 0;
  for (;;) {
    std::uint64_t chunk = 0;
    std::size_t digits = 0;
    for (int v; i < size && (v = hex_value(p[i])) >= 0; ++i, ++digits) {
      if (chunk > (std::uint64_t{1} << 40)) return false;  // far beyond any body limit
      chunk = chunk * 16 + static_cast<std::uint64_t>(v);
    }
    if (digits == 0) return false;
    i = after_line(p, size, i);  // skips any chunk extension
    if (i > size) return false;
    if (chunk == 0) break;
    if (chunk > size - i || size - i - chunk < 2) return false;
    out.append(reinterpret_cast<const char*>(p + i), chunk);
    i += chunk;
    if (p[i] != '\r' || p[i + 1] != '\n') return false;
    i += 2;
  }
  // Trailer fields, then the empty line that ends the body. Like the head's
  // lines, and as the scan reads them, these may end in a lone LF.
  for (;;) {
    if (i < size && p[i] == '\n') return i + 1 == size;
    if (i + 1 < size && p[i] == '\r' && p[i + 1] == '\n') return i + 2 == size;
    while (i < size && p[i] != '\n') ++i;
    if (i == size) return false;
    ++i;
  }
}

}  // namespace ferry::http
