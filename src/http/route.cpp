// Responder: a route's answer written in place in the connection's output, or
// deferred through the server thread's mailbox (ferry/offload/framing.h).

#include <cstring>
#include <exception>

#include "ferry/core/status.h"
#include "ferry/http/route.h"
#include "http/http_framing.h"
#include "http/reply.h"

namespace ferry::http {

// Copies of what the response needs once the request's buffers are gone.
// What the deferred response's build needs. Apart from State, so that the
// build, which the mailbox entry (deferred) holds, never holds that entry back.
struct LaterResponseFacts {
  std::shared_ptr<Metrics> metrics;
  std::shared_ptr<AccessLog> access_log;  // null: no log
  std::string peer;
  std::string line;
  bool keep_alive = true;
  bool head_only = false;
};

struct Responder::Later::State {
  std::shared_ptr<offload::Framing::Deferred> deferred;
  std::shared_ptr<const LaterResponseFacts> facts;
};

void Responder::send(std::uint16_t status, std::string_view content_type, std::string_view body,
                     std::string_view headers) {
  if (answered_) throw Error("route answered its request twice");
  const std::size_t body_bytes = head_only_ ? 0 : body.size();
  HeadWriter w(dst_, room_);
  const std::size_t date_at = write_head(
      w, status, reinterpret_cast<const std::uint8_t*>(content_type.data()), content_type.size(), body.size(),
      keep_alive_, reinterpret_cast<const std::uint8_t*>(headers.data()), headers.size());
  if (w.ok() && w.size() + body_bytes <= room_) {
    write_http_date(dst_ + date_at);
    if (body_bytes != 0) std::memcpy(dst_ + w.size(), body.data(), body_bytes);
    written_ = offload::Framing::Written{w.size() + body_bytes, !keep_alive_};
    answered_ = true;
    framing_->record(status, written_.bytes, body_bytes, client_->peer, line_);
    return;
  }
  // More than the connection's room for one response: the server thread's
  // mailbox takes a response of any size.
  defer().complete([r = RouteResponse{status, std::string(content_type), std::string(body),
                                      std::string(headers)}] { return r; });
}

Responder::Later Responder::defer() {
  if (answered_) throw Error("route answered its request twice");
  if (client_->deferrer == nullptr) throw Error("this server cannot defer a response");
  Later later;
  later.state_ = std::make_shared<Later::State>();
  auto facts = std::make_shared<LaterResponseFacts>();
  facts->metrics = framing_->metrics();
  facts->access_log = framing_->access_log();
  facts->peer = std::string(client_->peer);
  facts->line = std::string(line_);
  facts->keep_alive = keep_alive_;
  facts->head_only = head_only_;
  later.state_->facts = std::move(facts);
  later.state_->deferred = client_->deferrer->defer();
  written_ = offload::Framing::Written{0, false, 0, true};
  answered_ = true;
  return later;
}

void Responder::Later::complete(std::function<RouteResponse()> make) const {
  // The build holds the facts, not the state: the state holds the mailbox
  // entry, which holds the build.
  state_->deferred->complete([s = state_->facts, make = std::move(make)] {
    std::uint16_t status = 500;
    std::string bytes;
    std::size_t body = 0;
    bool failed = false;  // the route's own failure closes the connection, as any 500 of the proxy's does
    try {
      const RouteResponse r = make();
      status = r.status;
      bytes = whole_response(r.status, r.content_type, r.body, s->keep_alive, r.headers, s->head_only);
      body = s->head_only ? 0 : r.body.size();
    } catch (const std::exception& e) {
      failed = true;
      bytes = HttpFraming::error_response(500, std::string("route failed: ") + e.what());
    }
    s->metrics->count(status, bytes.size());
    if (s->access_log) s->access_log->write(s->peer, s->line, status, body);
    return offload::Framing::Response{std::move(bytes), failed || !s->keep_alive};
  });
}

bool Responder::Later::abandoned() const noexcept {
  return state_->deferred->abandoned();
}

}  // namespace ferry::http
