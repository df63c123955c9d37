#include "http/http_framing.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "core/log.h"
#include "http/chunked_body.h"
#include "http/reply.h"

namespace ferry::http {

void write_http_date(std::uint8_t* dst) noexcept {
  thread_local std::time_t cached_second = -1;
  thread_local char cached[64];  // 29 used; room for what the compiler cannot rule out
  const std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    static const char* const kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    // Not strftime: the names must be English whatever the locale.
    std::snprintf(cached, sizeof(cached), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday], tm.tm_mday,
                  kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    cached_second = now;
  }
  std::memcpy(dst, cached, kDateLen);
}

std::string whole_response(std::uint16_t status, std::string_view content_type, std::string_view body,
                           bool keep_alive, std::string_view extra_headers, bool head_only) {
  std::string out;
  out.reserve(192 + content_type.size() + extra_headers.size() + (head_only ? 0 : body.size()));
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_phrase(status);
  out += "\r\nServer: ferry\r\nDate: ";
  const std::size_t date_at = out.size();
  out.append(kDateLen, '-');
  write_http_date(reinterpret_cast<std::uint8_t*>(out.data() + date_at));
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  if (!head_only) out += body;
  return out;
}

HttpFraming::HttpFraming(Limits limits, std::uint32_t slot_payload, std::shared_ptr<const Content> content,
                         std::shared_ptr<Metrics> metrics, std::shared_ptr<AccessLog> access_log)
    : limits_(limits),
      content_(std::move(content)),
      metrics_(std::move(metrics)),
      access_log_(std::move(access_log)) {
  max_request_bytes_ = http::max_request_bytes(limits_);
  // Pages are not in it: they are sent by reference (write_response).
  max_response_bytes_ = std::max<std::size_t>(std::size_t(slot_payload), kMaxHead + kRouteRoom);
}

void HttpFraming::record(std::uint16_t status, std::size_t bytes, std::size_t body, std::string_view peer,
                         std::string_view line) const noexcept {
  metrics_->count(status, bytes);
  if (access_log_) access_log_->write(peer, line, status, body);
}

offload::Framing::Scan HttpFraming::scan(const std::uint8_t* p, std::size_t n) const noexcept {
  const MessageScan s = scan_message(p, n, limits_);
  switch (s.result) {
    case MessageScan::Result::NeedMore: return {};
    case MessageScan::Result::Reject: return {Scan::Result::Reject, 0, 0, 0};
    case MessageScan::Result::Complete: break;
  }
  // Only the head goes to a worker; the proxy has already checked the body's
  // framing and size. A body is kept for the proxy's own use (the embedding
  // APIs take theirs in it).
  const std::size_t body_at = s.head_start + s.head_bytes;
  return {Scan::Result::Request, s.frame_bytes, s.head_start, s.head_bytes, body_at, s.frame_bytes - body_at};
}

std::string HttpFraming::error_response(std::uint16_t status, const std::string& why) {
  const std::string body = std::to_string(status) + " " + reason_phrase(status) + ": " + why + "\n";
  std::string out(kMaxHead + body.size(), '\0');
  HeadWriter w(reinterpret_cast<std::uint8_t*>(out.data()), kMaxHead);
  const std::size_t date_at =
      write_head(w, status, reinterpret_cast<const std::uint8_t*>("text/plain"), 10, body.size(), false);
  write_http_date(reinterpret_cast<std::uint8_t*>(out.data()) + date_at);
  out.resize(w.size());
  return out + body;
}

offload::Framing::Rejection HttpFraming::reject(const std::uint8_t* p, std::size_t n) const {
  const MessageScan s = scan_message(p, n, limits_);
  const Verdict v = s.result == MessageScan::Result::Reject ? s.verdict : Verdict{400, "malformed request"};
  std::string reply = error_response(v.status, v.why);
  metrics_->count(v.status, reply.size());
  return {std::move(reply), std::to_string(v.status) + " " + v.why};
}

std::string HttpFraming::failure_reply(Failure failure, const std::string& why) const {
  std::uint16_t status = 503;  // no workers, workers lost, server full: try again later
  if (failure == Failure::SlotTooSmall) status = 431;
  if (failure == Failure::ReadTimeout) status = 408;
  std::string reply = error_response(status, why);
  metrics_->count(status, reply.size());
  return reply;
}

offload::Framing::Written HttpFraming::write_response(ByteView out, std::uint8_t* dst,
                                                     const Client& client) const noexcept {
  ReplyMeta m;
  std::string_view line;
  // bytes: written into dst; body: the response's body length; page: a body sent by reference.
  const auto done = [&](std::uint16_t status, std::size_t bytes, std::size_t body, bool close,
                        ByteView page = {}) {
    record(status, bytes + page.size, body, client.peer, line);
    Written w{bytes, close, m.handle_ns};
    w.body = page;
    return w;
  };
  const auto fail = [&](const char* why) {
    // A reply the proxy cannot read is a worker bug; the client gets a 500.
    const std::string r = error_response(500, why);
    const std::size_t n = std::min(r.size(), max_response_bytes_);
    std::memcpy(dst, r.data(), n);
    return done(500, n, 0, true);
  };
  if (out.size < sizeof(m)) return fail("worker reply shorter than its header");
  std::memcpy(&m, out.data, sizeof(m));
  const bool no_body = (m.flags & kReplyNoBody) != 0;
  const bool close = (m.flags & kReplyClose) != 0;
  std::size_t rest = out.size - sizeof(m);
  if (m.line_len > rest || m.line_len > kMaxLoggedLine) return fail("worker reply's request line out of bounds");
  line = std::string_view(reinterpret_cast<const char*>(out.data) + sizeof(m), m.line_len);
  const std::uint8_t* head = out.data + sizeof(m) + m.line_len;
  rest -= m.line_len;

  if (m.kind == ReplyKind::Route) {
    if (m.head_len > rest) return fail("worker reply's query out of bounds");
    if (m.page >= content_->routes()) return fail("worker named a route that does not exist");
    return call_route(m, line, std::string_view(reinterpret_cast<const char*>(head), m.head_len), dst,
                      client);
  }
  if (m.head_len > rest || m.head_len > kMaxHead || m.date_at + kDateLen > m.head_len)
    return fail("worker reply head out of bounds");
  std::memcpy(dst, head, m.head_len);
  write_http_date(dst + m.date_at);
  std::size_t n = m.head_len;
  std::size_t body = 0;
  if (m.kind == ReplyKind::Inline) {
    body = rest - m.head_len;
    if (n + body > max_response_bytes_) return fail("inline body larger than its room");
    std::memcpy(dst + n, head + m.head_len, body);
  } else if (m.kind == ReplyKind::Page) {
    if (m.page >= content_->size()) return fail("worker named a page that does not exist");
    if (!no_body) {
      const std::string& page = content_->page(m.page);
      // A small page is copied after its head, so that the response goes out
      // in one piece: its copy is bounded as any response's is (the room the
      // connection reserves for each one in flight).
      if (page.size() <= kCopyPagesUpTo && n + page.size() <= max_response_bytes_) {
        std::memcpy(dst + n, page.data(), page.size());
        return done(m.status, n + page.size(), page.size(), close);
      }
      // A larger one goes from the page store itself, which lives as long as
      // this framing and never changes: every connection sends the one copy.
      return done(m.status, n, page.size(), close,
                  ByteView{reinterpret_cast<const std::uint8_t*>(page.data()), page.size()});
    }
  } else {
    return fail("unknown worker reply kind");
  }
  return done(m.status, n + body, body, close);
}

offload::Framing::Written HttpFraming::call_route(const ReplyMeta& m, std::string_view line,
                                                  std::string_view query, std::uint8_t* dst,
                                                  const Client& client) const noexcept {
  const RouteBinding& binding = content_->route(m.page);
  const bool head_only = (m.flags & kReplyNoBody) != 0;
  Responder reply(*this, client, line, (m.flags & kReplyClose) == 0, head_only, dst, max_response_bytes_);
  // An answer the route did not give: the status, and the connection closes.
  const auto refuse = [&](std::uint16_t status, const std::string& why) {
    try {
      const std::string r = error_response(status, why);
      const std::size_t n = std::min(r.size(), max_response_bytes_);
      std::memcpy(dst, r.data(), n);
      record(status, n, 0, client.peer, line);
      return Written{n, true, m.handle_ns};
    } catch (...) {
      return Written{0, true, m.handle_ns};
    }
  };
  bool threw = false;
  std::string failure;
  try {
    RouteRequest request;
    request.method = (m.flags & kReplyPost) != 0 ? Methods::Post : head_only ? Methods::Head : Methods::Get;
    request.path = binding.path;
    request.query = query;
    request.body = std::string_view(reinterpret_cast<const char*>(client.kept.data), client.kept.size);
    request.peer = client.peer;
    request.received_ns = client.received_ns;
    std::string decoded;  // only a chunked body is copied
    if ((m.flags & kReplyChunkedBody) != 0) {
      if (!decode_chunked_body(client.kept.data, client.kept.size, decoded))
        return refuse(400, "malformed chunked body");
      request.body = decoded;
    }
    binding.route->handle(request, reply);
    if (!reply.answered()) return refuse(500, "route " + binding.path + " gave no answer");
  } catch (const std::exception& e) {
    threw = true;
    failure = e.what();
  } catch (...) {
    threw = true;
    failure = "an exception that is not a std::exception";
  }
  if (threw) {
    if (!reply.answered()) return refuse(500, "route " + binding.path + " failed: " + failure);
    // The client has its answer; only the log can say what went wrong after it.
    static log::Throttle throttle;
    if (const long long held = throttle.pass(); held >= 0)
      log::app().warn("http route {} threw after answering: {}{}", binding.path, failure,
                      log::suppressed_note(held));
  }
  reply.written_.worker_ns = m.handle_ns;
  return reply.written_;
}

}  // namespace ferry::http
