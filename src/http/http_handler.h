#pragma once
// The HTTP work on the workers, one source for the CPU and the GPU: parse and
// validate the request head, route it, and write the reply (reply.h). Routes:
// the content table (with "/" as "/index.html"), /health, /metrics (rendered by
// the proxy) and /inference (503 until the embedding service exists). GET and
// HEAD are served; other methods get the reference's 404 with Connection: close.

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

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    RequestHead r;
    const Verdict v = parse_request_head(in.data, in.size, &r);
    if (v.status != 200) return error(out, v.status, v.why, false);
    const bool head_only = r.method == Method::Head;
    if (r.method != Method::Get && !head_only) return error(out, 404, "method not served", false);

    // The normalized path is written where the reply will go: it is only
    // needed until the route is chosen.
    std::size_t plen = 0;
    if (r.path_len > out.size) return error(out, 414, "path longer than a slot", head_only);
    const Verdict pv = normalize_path(in.data + r.path, r.path_len, out.data, &plen);
    if (pv.status != 200) return error(out, pv.status, pv.why, head_only);
    const std::uint8_t* path = out.data;

    if (syntax::equals(path, plen, "/health"))
      return inline_reply(out, 200, "text/plain", "ok\n", r.keep_alive, head_only);
    if (syntax::equals(path, plen, "/metrics")) {
      ReplyMeta m;
      m.kind = ReplyKind::Metrics;
      m.flags = static_cast<std::uint8_t>((r.keep_alive ? 0 : kReplyClose) | (head_only ? kReplyNoBody : 0));
      std::memcpy(out.data, &m, sizeof(m));
      return sizeof(m);
    }
    if (syntax::equals(path, plen, "/inference"))
      return inline_reply(out, 503, "application/json",
                          "{\"error\":\"no embedding model is loaded: the inference service is not part of "
                          "this server yet\"}\n",
                          r.keep_alive, head_only);
    const ContentEntry* e = syntax::equals(path, plen, "/") ? content.find(reinterpret_cast<const std::uint8_t*>("/index.html"), 11)
                                                            : content.find(path, plen);
    if (e == nullptr) return error(out, 404, "no such page", head_only);

    ReplyMeta m;
    m.status = 200;
    m.kind = ReplyKind::Page;
    m.page = e->page;
    m.flags = static_cast<std::uint8_t>((r.keep_alive ? 0 : kReplyClose) | (head_only ? kReplyNoBody : 0));
    HeadWriter w(out.data + sizeof(m), out.size - sizeof(m));
    m.date_at = static_cast<std::uint32_t>(
        write_head(w, 200, content.strings + e->type_offset, e->type_len, e->body_len, r.keep_alive));
    if (!w.ok()) return error(out, 500, "reply head larger than a slot", head_only);
    m.head_len = static_cast<std::uint32_t>(w.size());
    std::memcpy(out.data, &m, sizeof(m));
    return sizeof(m) + w.size();
  }

 private:
  FERRY_HOST_DEVICE static std::size_t inline_reply(MutableByteView out, std::uint16_t status, const char* type,
                                                    const char* body, bool keep_alive, bool head_only) {
    std::size_t body_len = 0;
    while (body[body_len] != '\0') ++body_len;
    ReplyMeta m;
    m.status = status;
    m.kind = ReplyKind::Inline;
    m.flags = static_cast<std::uint8_t>((keep_alive ? 0 : kReplyClose) | (head_only ? kReplyNoBody : 0));
    HeadWriter w(out.data + sizeof(m), out.size - sizeof(m));
    std::size_t type_len = 0;
    while (type[type_len] != '\0') ++type_len;
    m.date_at = static_cast<std::uint32_t>(
        write_head(w, status, reinterpret_cast<const std::uint8_t*>(type), type_len, body_len, keep_alive));
    m.head_len = static_cast<std::uint32_t>(w.size());
    if (!head_only) w.put(body);
    std::memcpy(out.data, &m, sizeof(m));
    return sizeof(m) + w.size();
  }

  // An error ends the connection, as the reference's 404 does: what follows a
  // request the server could not read is not trusted to be a request.
  FERRY_HOST_DEVICE static std::size_t error(MutableByteView out, std::uint16_t status, const char* why,
                                             bool head_only) {
    // Body: "404 Not Found: no such page\n".
    char body[160];
    HeadWriter b(reinterpret_cast<std::uint8_t*>(body), sizeof(body) - 1);
    b.put_uint(status);
    b.byte(' ');
    b.put(reason_phrase(status));
    b.put(": ");
    b.put(why);
    b.byte('\n');
    const std::size_t n = b.size() < sizeof(body) - 1 ? b.size() : sizeof(body) - 1;
    body[n] = '\0';
    return inline_reply(out, status, "text/plain", body, false, head_only);
  }
};

}  // namespace ferry::http
