#pragma once
// An HTTP route: a path the workers send to a handler on the proxy threads.
// The built-in /health, /metrics and embedding APIs are routes too, registered
// this way; docs/http.md "Adding a route" walks through one.
//
//   class Hello final : public http::Route {
//     void handle(const http::RouteRequest&, http::Responder& reply) const override {
//       reply.send(200, "text/plain", "hello\n");
//     }
//   };
//   options.routes.push_back({"/hello", http::Methods::Get | http::Methods::Head,
//   std::make_shared<Hello>()});
//
// A worker (CPU thread or GPU) parses the request, finds the path in its index
// and checks the method: a method the route does not take gets 405 there, and
// with --api-key a request without the key gets 401 unless the route is open.
// The proxy thread that read the request then calls the route's handle() (one
// virtual call), which answers through the Responder: now, or later from any
// thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ferry/offload/framing.h"

namespace ferry::http {

// The methods a route takes, ORed. HEAD gets the head GET would, without the body.
enum class Methods : std::uint8_t { Get = 1, Head = 2, Post = 4 };
constexpr Methods operator|(Methods a, Methods b) {
  return static_cast<Methods>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool takes(Methods set, Methods m) {
  return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(m)) != 0;
}

// A request as its route sees it. Views into the connection's buffers: valid
// during Route::handle only; copy what a deferred answer needs.
struct RouteRequest {
  Methods method = Methods::Get;  // one of Get, Head, Post
  std::string_view path;          // the route's own path
  std::string_view query;         // after '?', still percent-encoded; empty without one
  std::string_view body;          // POST's body, its chunked framing removed
  std::string_view peer;          // "address:port"
  std::int64_t received_ns = 0;   // steady clock: when the proxy had the whole request
};

// A whole response, for Responder::Later::complete.
struct RouteResponse {
  std::uint16_t status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::string headers;  // extra field lines, each ending in CRLF
};

class HttpFraming;

// How a route answers its request, once: send() now, or defer() and complete
// the Later. The proxy writes the status line, Server, Date, Content-Type,
// Content-Length and Connection, counts the response in /metrics and logs it.
class Responder {
 public:
  // Answers now. headers: extra field lines, each ending in CRLF. A response
  // larger than the connection's room for one is sent all the same (deferred
  // and completed at once). For HEAD the body is left out.
  void send(std::uint16_t status, std::string_view content_type, std::string_view body,
            std::string_view headers = {});

  // An answer another thread gives later; the connection's later responses
  // wait behind it, so order is kept. Copyable; complete it exactly once.
  class Later {
   public:
    // Any thread: make runs on the connection's proxy thread, which sends what
    // it returns. A no-op once the client has gone.
    void complete(std::function<RouteResponse()> make) const;
    // The client went away: the work may be skipped.
    bool abandoned() const noexcept;

   private:
    friend class Responder;
    struct State;
    std::shared_ptr<State> state_;
  };
  // Makes this response a deferred one. Throws ferry::Error where the caller
  // cannot wait (a framing driven without a deferrer, as in unit tests).
  Later defer();

  bool answered() const noexcept { return answered_; }

 private:
  friend class HttpFraming;
  Responder(const HttpFraming& framing, const offload::Framing::Client& client, std::string_view line,
            bool keep_alive, bool head_only, std::uint8_t* dst, std::size_t room) noexcept
      : framing_(&framing),
        client_(&client),
        line_(line),
        dst_(dst),
        room_(room),
        keep_alive_(keep_alive),
        head_only_(head_only) {}

  const HttpFraming* framing_;
  const offload::Framing::Client* client_;
  std::string_view line_;  // the request line, for the access log
  std::uint8_t* dst_;
  std::size_t room_;
  bool keep_alive_;
  bool head_only_;
  bool answered_ = false;
  offload::Framing::Written written_{};
};

class Route {
 public:
  virtual ~Route() = default;
  // On the proxy thread that read the request; every proxy thread calls it at
  // once, so it keeps no unsynchronised state. Must not block: a slow answer
  // goes through reply.defer(). A throw, or returning without answering, gets
  // the client a 500.
  virtual void handle(const RouteRequest& request, Responder& reply) const = 0;
};

// A path and what serves it. path is matched exactly, after the worker's
// normalisation (percent-decoding, dot segments): "/hello", never "/hello?x"
// or a prefix. A route replaces a page of the same path.
struct RouteBinding {
  std::string path;
  Methods methods = Methods::Get;
  std::shared_ptr<const Route> route;
  bool needs_api_key = true;  // false: served without --api-key's credentials (/health, /metrics)
};

}  // namespace ferry::http
