#pragma once
// The HTTP work on the workers, one source for the CPU and the GPU: parse and
// validate the request head, find its path in the index (content_view.h), and
// write the reply (reply.h). A page is named for the proxy to send ("/" is
// "/index.html" unless a route takes "/"); a route's request goes to the proxy,
// which calls its handler (ferry/http/route.h): /health, /metrics, the
// embedding APIs and a program's own routes alike. With --api-key, every path
// but the open routes needs the key (ContentView::authorized). Pages take GET
// and HEAD, routes the methods they were registered with (405 for others);
// a method neither takes gets the reference's 404 with Connection: close.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ferry/core/bytes.h"
#include "ferry/core/host_device.h"
#include "http/content_view.h"
#include "http/reply.h"
#include "http/request_parser.h"

namespace ferry::http {

struct HttpHandler {
  static constexpr const char* kName = "http";

  ContentView content;

  // On the GPU the request sits in host memory, read over PCIe: parsing it in
  // place costs a round trip for each of hundreds of dependent byte loads. A
  // head that fits is first copied into the thread's local memory with
  // independent 16-byte loads, which the GPU keeps in flight together; the
  // path is normalised there too rather than in the (host) reply slot.
  static constexpr std::size_t kLocalBytes = 2048;

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    const std::uint64_t started = worker_clock_ns();
#if defined(__CUDA_ARCH__)
    alignas(16) std::uint8_t local_head[kLocalBytes];
    alignas(16) std::uint8_t local_path[kLocalBytes];
    if (in.size <= kLocalBytes && (reinterpret_cast<std::uintptr_t>(in.data) & 15u) == 0) {
      // Slots are 16-byte multiples: reading whole words stays inside this one.
      const auto* src = reinterpret_cast<const uint4*>(in.data);
      auto* dst = reinterpret_cast<uint4*>(local_head);
      const std::size_t words = (in.size + 15) / 16;
      for (std::size_t i = 0; i < words; ++i) dst[i] = src[i];
      in.data = local_head;
    }
    std::uint8_t* scratch = out.data;
    if (in.size <= kLocalBytes) scratch = local_path;
#else
    std::uint8_t* scratch = out.data;
#endif
    return serve(in, out, scratch, started);
  }

 private:
  // scratch: room for the normalised path (at least in.size bytes); it may be
  // the reply slot itself, which is only written once the route is chosen.
  FERRY_HOST_DEVICE std::size_t serve(ByteView in, MutableByteView out, std::uint8_t* scratch,
                                      std::uint64_t started) const {
    Reply reply{out, started, in.data, request_line_length(in)};
    RequestHead r;
    const Verdict v = parse_request_head(in.data, in.size, &r);
    const bool head_only = r.method == Method::Head;  // known as soon as the method is read
    if (v.status != 200) return reply.error(v.status, v.why, head_only);
    const bool post = r.method == Method::Post;
    if (r.method != Method::Get && !head_only && !post) return reply.error(404, "method not served", false);

    std::size_t plen = 0;
    if (r.path_len > out.size) return reply.error(414, "path longer than a slot", head_only);
    if (r.path_len == 0) {  // an absolute-form target without a path: "/" (RFC 9110 §4.2.3)
      scratch[0] = '/';
      plen = 1;
    } else if (const Verdict pv = normalize_path(in.data + r.path, r.path_len, scratch, &plen); pv.status != 200) {
      return reply.error(pv.status, pv.why, head_only);
    }
    const std::uint8_t* path = scratch;

    const ContentEntry* e = content.find(path, plen);
    if (e == nullptr && syntax::equals(path, plen, "/"))
      e = content.find(reinterpret_cast<const std::uint8_t*>("/index.html"), 11);

    // --api-key: every path but the open routes (TEI's public /health and /metrics) needs it.
    if ((e == nullptr || e->open == 0) &&
        !content.authorized(r.has_authorization ? in.data + r.authorization : nullptr, r.authorization_len))
      return reply.unauthorized(r.keep_alive, head_only);

    if (e != nullptr && e->route_methods != 0) {
      const std::uint8_t method = post ? kMethodPost : head_only ? kMethodHead : kMethodGet;
      if ((e->route_methods & method) == 0) return reply.error(405, takes(e->route_methods), head_only);
      return reply.route(e->page, in.data + r.query, r.query_len, r.chunked, post, r.keep_alive, head_only);
    }
    if (post) return reply.error(404, "method not served", false);
    if (e == nullptr) return reply.error(404, "no such page", head_only);
    return reply.page(*e, content.strings + e->type_offset, r.keep_alive, head_only);
  }

  // A 405's reason: the methods the route takes.
  FERRY_HOST_DEVICE static const char* takes(std::uint8_t methods) {
    switch (methods & (kMethodGet | kMethodHead | kMethodPost)) {
      case kMethodGet: return "this endpoint takes GET";
      case kMethodHead: return "this endpoint takes HEAD";
      case kMethodGet | kMethodHead: return "this endpoint takes GET or HEAD";
      case kMethodPost: return "this endpoint takes POST";
      case kMethodGet | kMethodPost: return "this endpoint takes GET or POST";
      case kMethodHead | kMethodPost: return "this endpoint takes HEAD or POST";
      default: return "this endpoint takes GET, HEAD or POST";
    }
  }

  FERRY_HOST_DEVICE static std::size_t request_line_length(ByteView in) {
    std::size_t n = 0;
    while (n < in.size && n < kMaxLoggedLine && in.data[n] != '\r' && in.data[n] != '\n') ++n;
    return n;
  }

  // Writes one reply: the meta, the request line, the head and an inline body.
  struct Reply {
    MutableByteView out;
    std::uint64_t started_ns;
    const std::uint8_t* line;
    std::size_t line_len;

    FERRY_HOST_DEVICE std::size_t page(const ContentEntry& e, const std::uint8_t* type, bool keep_alive,
                                       bool head_only) {
      ReplyMeta m = meta(200, ReplyKind::Page, keep_alive, head_only);
      m.page = e.page;
      HeadWriter w = head_writer();
      m.date_at = static_cast<std::uint32_t>(write_head(w, 200, type, e.type_len, e.body_len, keep_alive));
      if (!w.ok()) return error(500, "reply head larger than a slot", head_only);
      return finish(m, w);
    }

    FERRY_HOST_DEVICE std::size_t inline_body(std::uint16_t status, const char* type, const char* body,
                                              bool keep_alive, bool head_only, const char* extra = nullptr) {
      ReplyMeta m = meta(status, ReplyKind::Inline, keep_alive, head_only);
      HeadWriter w = head_writer();
      m.date_at = static_cast<std::uint32_t>(write_head(w, status, reinterpret_cast<const std::uint8_t*>(type),
                                                        length(type), length(body), keep_alive, extra));
      const std::size_t head_len = w.size();
      if (!head_only) w.put(body);
      const std::size_t n = finish(m, w);
      // finish() recorded the whole of w as head: the body follows it.
      patch_head_len(head_len);
      return n;
    }

    // The proxy calls the route's handler; the query rides as the head.
    FERRY_HOST_DEVICE std::size_t route(std::uint32_t index, const std::uint8_t* query, std::size_t query_len,
                                        bool chunked, bool post, bool keep_alive, bool head_only) {
      ReplyMeta m = meta(200, ReplyKind::Route, keep_alive, head_only);
      m.page = index;
      if (chunked) m.flags = static_cast<std::uint8_t>(m.flags | kReplyChunkedBody);
      if (post) m.flags = static_cast<std::uint8_t>(m.flags | kReplyPost);
      HeadWriter w = head_writer();
      w.put(query, query_len);
      if (!w.ok()) return error(414, "query string longer than a slot", head_only);
      return finish(m, w);
    }

    // A request without the --api-key credentials: TEI's error shape (TEI
    // itself sends an empty 401), and the connection stays open.
    FERRY_HOST_DEVICE std::size_t unauthorized(bool keep_alive, bool head_only) {
      return inline_body(401, "application/json",
                         "{\"error\":\"missing or wrong API key: send Authorization: Bearer KEY\","
                         "\"error_type\":\"Unauthorized\"}",
                         keep_alive, head_only, "WWW-Authenticate: Bearer\r\n");
    }

    // An error ends the connection, as the reference's 404 does: what follows a
    // request the server could not read is not trusted to be a request.
    FERRY_HOST_DEVICE std::size_t error(std::uint16_t status, const char* why, bool head_only) {
      char body[160];  // "404 Not Found: no such page\n"
      HeadWriter b(reinterpret_cast<std::uint8_t*>(body), sizeof(body) - 1);
      b.put_uint(status);
      b.byte(' ');
      b.put(reason_phrase(status));
      b.put(": ");
      b.put(why);
      b.byte('\n');
      const std::size_t n = b.size() < sizeof(body) - 1 ? b.size() : sizeof(body) - 1;
      body[n] = '\0';
      return inline_body(status, "text/plain", body, false, head_only);
    }

   private:
    FERRY_HOST_DEVICE static std::size_t length(const char* s) {
      std::size_t n = 0;
      while (s[n] != '\0') ++n;
      return n;
    }

    FERRY_HOST_DEVICE ReplyMeta meta(std::uint16_t status, ReplyKind kind, bool keep_alive, bool head_only) const {
      ReplyMeta m;
      m.status = status;
      m.kind = kind;
      m.flags = static_cast<std::uint8_t>((keep_alive ? 0 : kReplyClose) | (head_only ? kReplyNoBody : 0));
      m.line_len = static_cast<std::uint16_t>(line_len);
      return m;
    }

    FERRY_HOST_DEVICE HeadWriter head_writer() const {
      const std::size_t at = sizeof(ReplyMeta) + line_len;
      return HeadWriter(out.data + at, out.size > at ? out.size - at : 0);
    }

    // Writes the meta and the request line around what w wrote.
    FERRY_HOST_DEVICE std::size_t finish(ReplyMeta& m, const HeadWriter& w) {
      if (!w.ok() || sizeof(ReplyMeta) + line_len > out.size) {
        // No room for the reply (a slot smaller than any request could fill):
        // an empty head, which the proxy answers with a 500.
        m.head_len = 0;
        m.line_len = 0;
        std::memcpy(out.data, &m, sizeof(m));
        return sizeof(ReplyMeta);
      }
      for (std::size_t i = 0; i < line_len; ++i) out.data[sizeof(ReplyMeta) + i] = line[i];
      m.head_len = static_cast<std::uint32_t>(w.size());
      const std::uint64_t spent = worker_clock_ns() - started_ns;
      m.handle_ns = spent == 0 ? 1 : (spent > 0xffffffffu ? 0xffffffffu : static_cast<std::uint32_t>(spent));
      std::memcpy(out.data, &m, sizeof(m));
      return sizeof(ReplyMeta) + line_len + w.size();
    }

    FERRY_HOST_DEVICE void patch_head_len(std::size_t head_len) {
      ReplyMeta m;
      std::memcpy(&m, out.data, sizeof(m));
      m.head_len = static_cast<std::uint32_t>(head_len);
      std::memcpy(out.data, &m, sizeof(m));
    }
  };
};

}  // namespace ferry::http
