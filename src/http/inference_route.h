#pragma once
// The embedding APIs on the proxy side. A worker routes /inference, /embed,
// /v1/embeddings, /embed_all, /tokenize, /decode, /info and /v1/models to a
// ReplyKind::Inference reply; the proxy thread
// then decodes the query or body (infer/api), tokenizes, and submits a job to
// the embedding service, deferring the response (Framing::Deferred). The
// batcher's result comes back to the same proxy thread, which writes the
// JSON. Refusals (bad input, a full queue, no model) are answered at once.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "ferry/offload/framing.h"
#include "http/access_log.h"
#include "http/inference_metrics.h"
#include "http/metrics.h"
#include "http/reply.h"
#include "infer/api/request.h"

namespace ferry::infer {
class EmbeddingService;
}

namespace ferry::http {

class InferenceRoute {
 public:
  // service may be null: every API then answers 503.
  InferenceRoute(std::shared_ptr<infer::EmbeddingService> service, infer::api::Limits limits,
                 std::shared_ptr<Metrics> metrics, std::shared_ptr<AccessLog> access_log);

  // m: the worker's reply; query: the raw query string it passed on.
  offload::Framing::Written answer(const ReplyMeta& m, std::string_view request_line, std::string_view query,
                                   const offload::Framing::Client& client, std::uint8_t* dst,
                                   std::size_t room) const noexcept;

  // /info's body: the model and the batching settings.
  std::string info_json() const;
  // /v1/models' body: the one model, in OpenAI's list shape.
  std::string models_json() const;
  // /health: 200 "ok", or 503 in TEI's error shape with the reason while the
  // embedding service is unhealthy (a batch stuck past --batch-timeout, a
  // faulted model). Without a model, 200: the rest of the server serves.
  struct Health {
    std::uint16_t status = 200;
    const char* content_type = "text/plain";
    std::string body = "ok\n";
  };
  Health health() const;
  // The embedding share of /metrics.
  std::string render_metrics() const { return inference_metrics_->render(); }

 private:
  struct Call;
  offload::Framing::Written submit(const ReplyMeta& m, infer::api::Request request, std::string_view request_line,
                                   const offload::Framing::Client& client, std::uint8_t* dst,
                                   std::size_t room) const;
  // On the proxy thread, once the batcher is done with the call.
  offload::Framing::Response build(Call& call) const;
  offload::Framing::Written inline_reply(std::uint16_t status, const std::string& body, bool keep_alive,
                                         std::string_view request_line, const offload::Framing::Client& client,
                                         std::uint8_t* dst, std::size_t room) const;
  // A 200 answered now whatever its size: inline when it fits room, else
  // through a deferred response completed at once (/tokenize's can be large).
  offload::Framing::Written reply_now(const std::string& body, bool keep_alive, std::string_view request_line,
                                      const offload::Framing::Client& client, std::uint8_t* dst,
                                      std::size_t room) const;
  // /tokenize and /decode: the tokenizer alone, on the proxy thread.
  std::variant<std::string, infer::api::Error> tokenize_body(std::string_view body) const;
  std::variant<std::string, infer::api::Error> decode_body(std::string_view body) const;

  std::shared_ptr<infer::EmbeddingService> service_;
  infer::api::Limits limits_;
  std::shared_ptr<Metrics> metrics_;
  std::shared_ptr<AccessLog> access_log_;
  std::shared_ptr<InferenceMetrics> inference_metrics_;
  std::int64_t created_ = 0;  // /v1/models' "created": when the route was made, in seconds since the epoch
};

// A whole JSON response: status line, Server, Date, Content-Type, Content-Length,
// Connection, the extra header lines (each ending in CRLF), then body.
std::string json_response(std::uint16_t status, std::string_view body, bool keep_alive,
                          std::string_view extra_headers = {});

}  // namespace ferry::http
