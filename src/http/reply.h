#pragma once
// What a worker answers, and the response heads both sides write.
//
// A worker's output starts with a ReplyMeta, then the response head, then, for
// an inline reply, its body. The proxy (http_framing.cpp) writes the head with
// the current Date put in at date_at, then the body: inline, a page from its
// page store, or, for /metrics, what it renders itself. Workers have no clock
// worth asking (a GPU's is not the wall clock); the proxy keeps one date string
// a second.

#include <cstddef>
#include <cstdint>

#include "ferry/core/host_device.h"

namespace ferry::http {

enum class ReplyKind : std::uint8_t { Inline = 0, Page = 1, Metrics = 2 };

inline constexpr std::uint8_t kReplyClose = 1;   // Connection: close; the proxy closes after it
inline constexpr std::uint8_t kReplyNoBody = 2;  // HEAD: the head only

struct ReplyMeta {
  std::uint16_t status = 200;
  ReplyKind kind = ReplyKind::Inline;
  std::uint8_t flags = 0;
  std::uint32_t page = 0;      // ReplyKind::Page
  std::uint32_t head_len = 0;  // bytes of head after the meta
  std::uint32_t date_at = 0;   // offset in the head of the 29 date characters
};
static_assert(sizeof(ReplyMeta) == 16);

inline constexpr std::size_t kDateLen = 29;  // "Sun, 06 Nov 1994 08:49:37 GMT"

FERRY_HOST_DEVICE inline const char* reason_phrase(std::uint16_t status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

// Appends to a fixed buffer; once out of room it stops writing and ok() is false.
class HeadWriter {
 public:
  FERRY_HOST_DEVICE HeadWriter(std::uint8_t* dst, std::size_t cap) : dst_(dst), cap_(cap) {}

  FERRY_HOST_DEVICE void put(const char* s) {
    for (; *s != '\0'; ++s) byte(static_cast<std::uint8_t>(*s));
  }
  FERRY_HOST_DEVICE void put(const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) byte(p[i]);
  }
  FERRY_HOST_DEVICE void put_uint(std::uint64_t v) {
    char digits[20];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) byte(static_cast<std::uint8_t>(digits[--n]));
  }
  FERRY_HOST_DEVICE void byte(std::uint8_t c) {
    if (len_ < cap_) dst_[len_] = c;
    ++len_;
  }
  FERRY_HOST_DEVICE std::size_t size() const { return len_; }
  FERRY_HOST_DEVICE bool ok() const { return len_ <= cap_; }

 private:
  std::uint8_t* dst_;
  std::size_t cap_;
  std::size_t len_ = 0;
};

// Writes "HTTP/1.1 status reason", Server, Date (placeholder), Content-Type,
// Content-Length and Connection, then the empty line. Returns where the date
// goes (its offset from the start of w).
FERRY_HOST_DEVICE inline std::size_t write_head(HeadWriter& w, std::uint16_t status, const std::uint8_t* type,
                                                std::size_t type_len, std::uint64_t content_length,
                                                bool keep_alive) {
  w.put("HTTP/1.1 ");
  w.put_uint(status);
  w.byte(' ');
  w.put(reason_phrase(status));
  w.put("\r\nServer: ferry\r\nDate: ");
  const std::size_t date_at = w.size();
  for (std::size_t i = 0; i < kDateLen; ++i) w.byte('-');
  w.put("\r\nContent-Type: ");
  w.put(type, type_len);
  w.put("\r\nContent-Length: ");
  w.put_uint(content_length);
  w.put(keep_alive ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
  return date_at;
}

}  // namespace ferry::http
