#include "http/message_scan.h"

namespace ferry::http {
namespace {

using namespace syntax;

MessageScan reject(std::uint16_t status, const char* why) {
  MessageScan s;
  s.result = MessageScan::Result::Reject;
  s.verdict = {status, why};
  return s;
}

// chunk-ext (RFC 9112 §7.1.1) in [i, end): *( BWS ";" BWS name [ BWS "=" BWS
// value ] ), a name a token, a value a token or a quoted-string.
bool chunk_extensions_ok(const std::uint8_t* p, std::size_t i, std::size_t end) {
  const auto skip_bws = [&] {
    while (i < end && is_ows(p[i])) ++i;
  };
  const auto token = [&] {
    const std::size_t start = i;
    while (i < end && is_tchar(p[i])) ++i;
    return i > start;
  };
  const auto quoted = [&] {
    if (i >= end || p[i] != '"') return false;
    for (++i; i < end; ++i) {
      const std::uint8_t c = p[i];
      if (c == '"') {
        ++i;
        return true;
      }
      if (c == '\\') {
        if (++i >= end || !is_field_char(p[i])) return false;
      } else if (!is_field_char(c)) {
        return false;
      }
    }
    return false;
  };
  while (i < end) {
    skip_bws();
    if (i >= end || p[i] != ';') return false;
    ++i;
    skip_bws();
    if (!token()) return false;
    const std::size_t before = i;
    skip_bws();
    if (i < end && p[i] == '=') {
      ++i;
      skip_bws();
      if (!token() && !quoted()) return false;
    } else {
      i = before;  // whitespace not followed by "=" belongs to the next extension
    }
  }
  return true;
}

constexpr const char* kFramingOver =
    "chunked body's framing (chunk-size lines, extensions, trailers) over its limit: send larger chunks";

// The end of a chunked body starting at `pos` (RFC 9112 §7.1): chunks of
// hex-size [; extensions] CRLF data CRLF, a last chunk of size 0, optional
// trailer fields and an empty line. Sets *end past it, or returns NeedMore.
// The data counts against max_body, everything else against max_chunk_framing.
MessageScan::Result scan_chunked(const std::uint8_t* p, std::size_t n, std::size_t pos, const Limits& limits,
                                 std::size_t* end, Verdict* verdict) {
  std::uint64_t body = 0;     // data bytes of the chunks so far
  std::uint64_t framing = 0;  // every other byte of the body up to pos
  const auto framing_over = [&](std::uint64_t more) {
    if (framing + more <= limits.max_chunk_framing) return false;
    *verdict = {413, kFramingOver};
    return true;
  };
  for (;;) {
    const std::size_t lf = find_lf(p, pos, n);
    if (lf == n) {
      if (n - pos > kMaxChunkLine) {  // a chunk-size line (with extensions) this long is not one
        *verdict = {400, "chunk-size line over 1024 bytes"};
        return MessageScan::Result::Reject;
      }
      return MessageScan::Result::NeedMore;
    }
    if (lf - pos > kMaxChunkLine) {  // the same verdict as while it was arriving
      *verdict = {400, "chunk-size line over 1024 bytes"};
      return MessageScan::Result::Reject;
    }
    // RFC 9112 §7.1: chunk lines end with CRLF; a lone LF is for the head only.
    if (lf == pos || p[lf - 1] != '\r') {
      *verdict = {400, "chunk-size line not ended by CRLF"};
      return MessageScan::Result::Reject;
    }
    const std::size_t le = lf - 1;
    std::size_t i = pos;
    std::uint64_t size = 0;
    while (i < le && hex_value(p[i]) >= 0) {
      if (size > (limits.max_body >> 4)) {
        *verdict = {413, "chunked body over the body limit"};
        return MessageScan::Result::Reject;
      }
      size = (size << 4) | static_cast<std::uint64_t>(hex_value(p[i]));
      ++i;
    }
    if (i == pos) {
      *verdict = {400, "malformed chunk size"};
      return MessageScan::Result::Reject;
    }
    if (!chunk_extensions_ok(p, i, le)) {
      *verdict = {400, "malformed chunk extension"};
      return MessageScan::Result::Reject;
    }
    body += size;
    if (body > limits.max_body) {
      *verdict = {413, "chunked body over the body limit"};
      return MessageScan::Result::Reject;
    }
    framing += lf + 1 - pos;
    if (framing_over(0)) return MessageScan::Result::Reject;
    pos = lf + 1;
    if (size == 0) break;
    if (n - pos < size + 2) {
      if (n - pos > size && p[pos + size] != '\r') {  // judged as soon as the byte is there
        *verdict = {400, "chunk data not followed by CRLF"};
        return MessageScan::Result::Reject;
      }
      return MessageScan::Result::NeedMore;
    }
    pos += size;
    if (p[pos] != '\r' || p[pos + 1] != '\n') {
      *verdict = {400, "chunk data not followed by CRLF"};
      return MessageScan::Result::Reject;
    }
    pos += 2;
    framing += 2;
  }
  // Trailer fields, then the empty line: framing, all of it.
  for (;;) {
    const std::size_t lf = find_lf(p, pos, n);
    if (lf == n) {
      // Two bytes or more without an LF are not the empty line that ends the
      // body ("\n" or "\r\n"), so its LF will add one more: judged now, the
      // verdict is the one the whole line will get.
      if (n - pos >= 2 && framing_over(n - pos + 1)) return MessageScan::Result::Reject;
      return MessageScan::Result::NeedMore;
    }
    const std::size_t le = line_end(p, pos, lf);
    if (le == pos) {
      *end = lf + 1;
      return MessageScan::Result::Complete;
    }
    Field f;
    if (!split_field(p, pos, le, &f)) {
      *verdict = {400, "malformed trailer field"};
      return MessageScan::Result::Reject;
    }
    framing += lf + 1 - pos;
    if (framing_over(0)) return MessageScan::Result::Reject;
    pos = lf + 1;
  }
}

}  // namespace

MessageScan scan_message(const std::uint8_t* p, std::size_t n, const Limits& limits) noexcept {
  // RFC 9112 §2.2: empty lines before a request line are ignored.
  std::size_t start = 0;
  for (;;) {
    if (start < n && p[start] == '\n') {
      ++start;
    } else if (start + 1 < n && p[start] == '\r' && p[start + 1] == '\n') {
      start += 2;
    } else if (start + 1 == n && p[start] == '\r') {
      return {};
    } else {
      break;
    }
    if (start > limits.max_head) return reject(400, "too many empty lines before the request");
  }

  // The request line.
  const std::size_t line_limit = start + limits.max_request_line;
  std::size_t lf = find_lf(p, start, n < line_limit + 1 ? n : line_limit + 1);
  if (lf == (n < line_limit + 1 ? n : line_limit + 1)) {
    if (n > line_limit) return reject(414, "request line over the limit");
    return {};
  }
  const std::size_t rl_end = line_end(p, start, lf);
  const bool http10 = rl_end - start >= 9 && equals(p + rl_end - 9, 9, " HTTP/1.0");

  // Field lines up to the empty line.
  const std::size_t head_limit = start + limits.max_head;
  bool has_length = false, has_te = false;
  std::uint64_t length = 0;
  std::size_t pos = lf + 1;
  std::size_t head_end = 0;
  for (;;) {
    const std::size_t stop = n < head_limit ? n : head_limit;
    lf = find_lf(p, pos, stop);
    if (lf == stop) {
      if (n >= head_limit) return reject(431, "request head over the limit");
      return {};
    }
    const std::size_t le = line_end(p, pos, lf);
    if (le == pos) {
      head_end = lf + 1;
      break;
    }
    Field f;
    // Malformed lines are the workers' to report, with the rest of the head;
    // only the two fields that frame the body are checked here.
    const std::uint8_t first = lower(p[pos]);
    if (first != 'c' && first != 't') {
      // Neither Content-Length nor Transfer-Encoding.
    } else if (split_field(p, pos, le, &f)) {
      if (iequals(p + f.name, f.name_len, "content-length")) {
        if (has_length) return reject(400, "more than one Content-Length");
        if (!parse_decimal(p + f.value, f.value_len, ~std::uint64_t{0} / 2, &length))
          return reject(400, "Content-Length is not a decimal number");
        has_length = true;
      } else if (iequals(p + f.name, f.name_len, "transfer-encoding")) {
        if (has_te) return reject(400, "more than one Transfer-Encoding");
        if (!iequals(p + f.value, f.value_len, "chunked"))
          return reject(400, "Transfer-Encoding other than chunked");
        has_te = true;
      }
    } else if (istarts_with(p + pos, le - pos, "transfer-encoding") ||
               istarts_with(p + pos, le - pos, "content-length")) {
      // "Transfer-Encoding : chunked" and the like: a framing field in a form
      // some parsers accept and others skip.
      return reject(400, "malformed Content-Length or Transfer-Encoding field");
    }
    pos = lf + 1;
  }
  if (has_length && has_te) return reject(400, "both Content-Length and Transfer-Encoding");
  if (has_te && http10) return reject(400, "Transfer-Encoding in an HTTP/1.0 request");

  MessageScan s;
  s.head_start = start;
  s.head_bytes = head_end - start;
  if (has_length) {
    if (length > limits.max_body) return reject(413, "Content-Length over the body limit");
    if (n - head_end < length) return {};
    s.frame_bytes = head_end + length;
  } else if (has_te) {
    std::size_t end = 0;
    Verdict v;
    switch (scan_chunked(p, n, head_end, limits, &end, &v)) {
      case MessageScan::Result::NeedMore: return {};
      case MessageScan::Result::Reject: return reject(v.status, v.why);
      case MessageScan::Result::Complete: s.frame_bytes = end; break;
    }
  } else {
    s.frame_bytes = head_end;
  }
  s.result = MessageScan::Result::Complete;
  return s;
}

}  // namespace ferry::http
