// ferry http's parsers on the bytes a client sends: the proxy's message scan
// (src/http/message_scan.cpp), then for each request it frames, the workers'
// head parser, path normalisation and the whole handler (src/http/
// request_parser.h, http_handler.h), as a connection would walk them.
//
// Input: one byte choosing small limits (so that 414/431/413 are reached), then
// the stream. Beside ASan/UBSan, it checks:
//  - a scan's verdict does not change as more bytes arrive (a prefix that is
//    Complete stays Complete with the same frame, a Reject stays Reject);
//  - a framed request lies inside the input, its head inside the frame;
//  - a normalised path starts with '/', is no longer than its source and has
//    no "." or ".." segment left;
//  - the handler's reply names a head inside the slot, with room for the date,
//    and a page or route that exists.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "http/chunked_body.h"
#include "http/content.h"
#include "http/http_handler.h"
#include "http/message_scan.h"

using namespace ferry::http;

namespace {

// A route, so that the handler's route branch (its methods, 405) is reached.
// Only the worker runs here: the route's handler is never called.
struct Unused final : Route {
  void handle(const RouteRequest&, Responder&) const override {}
};

const Content& content() {
  static const Content c =
      Content::load("", 1 << 20, {{"/r", Methods::Get | Methods::Post, std::make_shared<Unused>()}});
  return c;
}

void check_path(const std::uint8_t* src, std::size_t n) {
  std::vector<std::uint8_t> dst(n + 1);
  std::size_t len = 0;
  if (normalize_path(src, n, dst.data(), &len).status != 200) return;
  FUZZ_CHECK(len >= 1 && len <= n && dst[0] == '/');
  for (std::size_t i = 0; i < len; ++i) {
    if (dst[i] != '/') continue;
    const std::size_t s = i + 1;
    std::size_t e = s;
    while (e < len && dst[e] != '/') ++e;
    FUZZ_CHECK(!(e - s == 1 && dst[s] == '.'));
    FUZZ_CHECK(!(e - s == 2 && dst[s] == '.' && dst[s + 1] == '.'));
  }
}

void check_handler(const std::uint8_t* head, std::size_t n) {
  std::vector<std::uint8_t> slot(std::max<std::size_t>(n, 1024) + 64);
  HttpHandler h{content().view()};
  const std::size_t len = h(ferry::ByteView{head, n}, ferry::MutableByteView{slot.data(), slot.size()});
  FUZZ_CHECK(len >= sizeof(ReplyMeta) && len <= slot.size());
  ReplyMeta m;
  std::memcpy(&m, slot.data(), sizeof(m));
  FUZZ_CHECK(m.head_len <= len - sizeof(m));
  // The proxy writes a route's answer (the slot carries the query string
  // instead): no date to place.
  if (m.kind == ReplyKind::Route) {
    FUZZ_CHECK(m.page < content().routes());
    return;
  }
  FUZZ_CHECK(m.date_at + kDateLen <= m.head_len);
  if (m.kind == ReplyKind::Page) FUZZ_CHECK(m.page < content().size());
  FUZZ_CHECK(m.status >= 200 && m.status < 600);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  Limits limits;
  if (data[0] & 1) {
    limits.max_request_line = 64;
    limits.max_head = 256;
    limits.max_body = 128;
  }
  const std::uint8_t* p = data + 1;
  std::size_t n = size - 1;
  while (n > 0) {
    const MessageScan s = scan_message(p, n, limits);
    if (s.result == MessageScan::Result::NeedMore) {
      // Every shorter prefix also needs more.
      for (std::size_t k = 0; k < n; k += 1 + k / 8)
        FUZZ_CHECK(scan_message(p, k, limits).result == MessageScan::Result::NeedMore);
      break;
    }
    if (s.result == MessageScan::Result::Reject) {
      FUZZ_CHECK(s.verdict.status >= 400 && s.verdict.status < 600);
      break;
    }
    FUZZ_CHECK(s.frame_bytes <= n && s.frame_bytes > 0);
    FUZZ_CHECK(s.head_start + s.head_bytes <= s.frame_bytes);
    FUZZ_CHECK(s.head_bytes <= limits.max_head);
    // Bytes after the frame do not change it.
    const MessageScan again = scan_message(p, s.frame_bytes, limits);
    FUZZ_CHECK(again.result == MessageScan::Result::Complete && again.frame_bytes == s.frame_bytes);
    const std::uint8_t* head = p + s.head_start;
    RequestHead r;
    if (parse_request_head(head, s.head_bytes, &r).status == 200) {
      FUZZ_CHECK(r.target + r.target_len <= s.head_bytes);
      FUZZ_CHECK(r.path + r.path_len <= s.head_bytes);
      check_path(head + r.path, r.path_len);
      // The body the proxy keeps for the embedding APIs: a chunked one the scan
      // accepted decodes, to no more data than its framing holds.
      const std::uint8_t* body = head + s.head_bytes;
      const std::size_t body_bytes = s.frame_bytes - s.head_start - s.head_bytes;
      std::string data;
      if (r.chunked) {
        FUZZ_CHECK(decode_chunked_body(body, body_bytes, data));
        FUZZ_CHECK(data.size() <= body_bytes);
      }
    }
    // Any bytes at all: decoding fails or succeeds, never reads outside them.
    std::string any;
    (void)decode_chunked_body(p, s.frame_bytes, any);
    check_handler(head, s.head_bytes);
    p += s.frame_bytes;
    n -= s.frame_bytes;
  }
  return 0;
}
