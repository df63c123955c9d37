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

#if !defined(__CUDA_ARCH__)
#include <chrono>
#endif

namespace ferry::http {

// Route: the proxy calls the route's handler (ferry/http/route.h); the reply's
// "head" is then the request's raw query string.
enum class ReplyKind : std::uint8_t { Inline = 0, Page = 1, Route = 2 };

inline constexpr std::uint8_t kReplyClose = 1;        // Connection: close; the proxy closes after it
inline constexpr std::uint8_t kReplyNoBody = 2;       // HEAD: the head only
inline constexpr std::uint8_t kReplyChunkedBody = 4;  // Route: the request's body is chunked
inline constexpr std::uint8_t kReplyPost = 8;         // Route: the request is a POST

// Layout of a worker's output: ReplyMeta, the request line (line_len bytes,
// for the access log), the head (head_len), then an inline body.
struct ReplyMeta {
  std::uint16_t status = 200;
  ReplyKind kind = ReplyKind::Inline;
  std::uint8_t flags = 0;
  std::uint32_t page = 0;       // ReplyKind::Page: the page; ReplyKind::Route: the route (Content::route)
  std::uint32_t head_len = 0;   // bytes of head
  std::uint32_t date_at = 0;    // offset in the head of the 29 date characters
  std::uint32_t handle_ns = 0;  // the worker's time on the request, by its own clock
  std::uint16_t line_len = 0;   // bytes of request line kept (at most kMaxLoggedLine)
  std::uint16_t reserved = 0;
};
static_assert(sizeof(ReplyMeta) == 24);

inline constexpr std::size_t kMaxLoggedLine = 256;

// A worker's clock in nanoseconds: the GPU's global timer, or the host's steady clock.
FERRY_HOST_DEVICE inline std::uint64_t worker_clock_ns() {
#if defined(__CUDA_ARCH__)
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
#endif
}

inline constexpr std::size_t kDateLen = 29;  // "Sun, 06 Nov 1994 08:49:37 GMT"

FERRY_HOST_DEVICE inline const char* reason_phrase(std::uint16_t status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 411: return "Length Required";
    case 414: return "URI Too Long";
    case 422: return "Unprocessable Content";
    case 424: return "Failed Dependency";
    case 429: return "Too Many Requests";
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
// Content-Length, Connection and the extra field lines (each ending in CRLF),
// then the empty line. Returns where the date goes (its offset from the start of w).
FERRY_HOST_DEVICE inline std::size_t write_head(HeadWriter& w, std::uint16_t status, const std::uint8_t* type,
                                                std::size_t type_len, std::uint64_t content_length,
                                                bool keep_alive, const std::uint8_t* extra,
                                                std::size_t extra_len) {
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
  w.put(keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n");
  w.put(extra, extra_len);
  w.put("\r\n");
  return date_at;
}

FERRY_HOST_DEVICE inline std::size_t write_head(HeadWriter& w, std::uint16_t status, const std::uint8_t* type,
                                                std::size_t type_len, std::uint64_t content_length,
                                                bool keep_alive, const char* extra = nullptr) {
  std::size_t extra_len = 0;
  while (extra != nullptr && extra[extra_len] != '\0') ++extra_len;
  return write_head(w, status, type, type_len, content_length, keep_alive,
                    reinterpret_cast<const std::uint8_t*>(extra), extra_len);
}

}  // namespace ferry::http
