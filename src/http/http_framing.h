#pragma once
// HTTP/1.1 as a framing of the server threads (ferry/offload/framing.h): the
// proxy finds where each request ends (message_scan.h) and forwards its head to
// a worker; it writes the worker's reply (reply.h) with the current date, names
// a page of the page store for the server thread to send by reference, or
// calls the route the worker named (ferry/http/route.h). Requests it cannot
// frame get their status here, with Connection: close.

#include <memory>
#include <string>
#include <string_view>

#include "ferry/http/route.h"
#include "ferry/offload/framing.h"
#include "http/access_log.h"
#include "http/content.h"
#include "http/message_scan.h"
#include "http/metrics.h"
#include "http/reply.h"

namespace ferry::http {

class HttpFraming final : public offload::Framing {
 public:
  // Largest reply head a worker writes; a route's answer of up to kRouteRoom
  // bytes is written in place, a larger one deferred (Responder::send).
  static constexpr std::size_t kMaxHead = 1024;
  static constexpr std::size_t kRouteRoom = 32768;
  // Pages up to this size are copied into the response; larger ones are sent
  // by reference from the page store.
  static constexpr std::size_t kCopyPagesUpTo = 16384;

  // access_log may be null (no log).
  HttpFraming(Limits limits, std::uint32_t slot_payload, std::shared_ptr<const Content> content,
              std::shared_ptr<Metrics> metrics, std::shared_ptr<AccessLog> access_log = nullptr);

  Scan scan(const std::uint8_t* data, std::size_t size) const noexcept override;
  Rejection reject(const std::uint8_t* data, std::size_t size) const override;
  std::string failure_reply(Failure failure, const std::string& why) const override;
  std::size_t max_request_bytes() const noexcept override { return max_request_bytes_; }
  std::size_t max_response_bytes() const noexcept override { return max_response_bytes_; }
  Written write_response(ByteView worker_output, std::uint8_t* dst, const Client& client) const noexcept override;

  // A whole response the proxy makes itself (a refusal): Connection: close.
  static std::string error_response(std::uint16_t status, const std::string& why);

  // Counts a response in /metrics (bytes: all of it) and logs it (body: its body's bytes).
  void record(std::uint16_t status, std::size_t bytes, std::size_t body, std::string_view peer,
              std::string_view line) const noexcept;
  // Where record() writes; a deferred response holds them, for it may outlive this framing.
  const std::shared_ptr<Metrics>& metrics() const noexcept { return metrics_; }
  const std::shared_ptr<AccessLog>& access_log() const noexcept { return access_log_; }

 private:
  Written call_route(const ReplyMeta& m, std::string_view line, std::string_view query, std::uint8_t* dst,
                     const Client& client) const noexcept;

  Limits limits_;
  std::shared_ptr<const Content> content_;
  std::shared_ptr<Metrics> metrics_;
  std::shared_ptr<AccessLog> access_log_;
  std::size_t max_request_bytes_;
  std::size_t max_response_bytes_;
};

// The current time as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"),
// 29 characters, formatted once a second per thread.
void write_http_date(std::uint8_t* dst) noexcept;

// A whole response: status line, Server, Date, Content-Type, Content-Length,
// Connection, the extra header lines (each ending in CRLF), then the body
// unless head_only.
std::string whole_response(std::uint16_t status, std::string_view content_type, std::string_view body,
                           bool keep_alive, std::string_view extra_headers = {}, bool head_only = false);

}  // namespace ferry::http
