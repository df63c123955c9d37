#pragma once
// Where an HTTP/1.1 request ends (RFC 9112 §6): the end of its head, plus a
// Content-Length or chunked body. This is all the proxy parses; the rest of the
// request is the workers' (request_parser.h). It also refuses what would let
// the proxy and a worker disagree on the boundary (request smuggling): both
// Content-Length and Transfer-Encoding, a repeated or malformed Content-Length,
// and any Transfer-Encoding but "chunked".

#include <cstddef>
#include <cstdint>

#include "http/syntax.h"

namespace ferry::http {

struct Limits {
  std::uint32_t max_request_line = 8192;  // 414 beyond
  std::uint32_t max_head = 16384;         // request line and fields; 431 beyond
  std::uint64_t max_body = 65536;         // a body's data (a chunked one's decoded bytes); 413 beyond
  // A chunked body's framing: its chunk-size lines with their extensions, the
  // line ends after its data, and its trailer section; 413 beyond. Bounded
  // apart from max_body, so that small chunks do not eat into the data's
  // limit, while the proxy, which holds a request's bytes until it is whole,
  // still knows how many that can be.
  std::uint64_t max_chunk_framing = 131072;
};

// The longest chunk-size line (with its extensions); 400 beyond.
inline constexpr std::size_t kMaxChunkLine = 1024;

// The most bytes one request can occupy in a connection's input.
inline std::size_t max_request_bytes(const Limits& l) {
  return std::size_t(l.max_head) + 2 * std::size_t(l.max_request_line) + l.max_body + l.max_chunk_framing +
         kMaxChunkLine;
}

struct MessageScan {
  enum class Result { NeedMore, Complete, Reject };
  Result result = Result::NeedMore;
  std::size_t frame_bytes = 0;  // Complete: the whole request, leading empty lines included
  std::size_t head_start = 0;   // after the leading empty lines
  std::size_t head_bytes = 0;   // request line and fields, with the empty line ending them
  Verdict verdict;              // Reject: the status and why
};

// Scans the bytes of one connection from a request boundary.
MessageScan scan_message(const std::uint8_t* p, std::size_t n, const Limits& limits) noexcept;

}  // namespace ferry::http
