#pragma once
// The embedding APIs on the proxy side, as routes (ferry/http/route.h): one per
// row of infer::api::kEndpoints, over one InferenceRoute. The route decodes the
// query or body (infer/api), tokenizes, and submits a job to the embedding
// service, deferring the response (Responder::defer); the batcher's result
// comes back to the proxy thread that read the request, which writes the JSON.
// Refusals (bad input, a full queue, no model) are answered at once.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ferry/http/route.h"
#include "http/inference_metrics.h"
#include "http/metrics.h"
#include "infer/api/request.h"

namespace ferry::infer {
class EmbeddingService;
}

namespace ferry::http {

class InferenceRoute {
 public:
  // service may be null: every API then answers 503.
  InferenceRoute(std::shared_ptr<infer::EmbeddingService> service, infer::api::Limits limits);

  // Answers one endpoint's request: now, or deferred until its batch is done.
  // Throws only where reply cannot answer (the framing then sends a 500).
  void answer(infer::api::Endpoint which, const RouteRequest& request, Responder& reply) const;

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
  void answer_or_throw(infer::api::Endpoint which, const RouteRequest& request, Responder& reply) const;
  void submit(infer::api::Request request, const RouteRequest& http_request, Responder& reply) const;
  // Once the batcher is done with the call, on the proxy thread.
  RouteResponse build(Call& call) const;
  // /tokenize and /decode: the tokenizer alone, on the proxy thread.
  std::variant<std::string, infer::api::Error> tokenize_body(std::string_view body) const;
  std::variant<std::string, infer::api::Error> decode_body(std::string_view body) const;

  std::shared_ptr<infer::EmbeddingService> service_;
  infer::api::Limits limits_;
  std::shared_ptr<InferenceMetrics> inference_metrics_;
  std::int64_t created_ = 0;  // /v1/models' "created": when the route was made, in seconds since the epoch
};

// The routes ferry http always serves, registered as a program's own are:
// /health and /metrics (open: no --api-key needed; GET and HEAD), then one
// route per embedding endpoint (infer::api::kEndpoints).
std::vector<RouteBinding> builtin_routes(std::shared_ptr<const InferenceRoute> inference,
                                         std::shared_ptr<const Metrics> metrics);

}  // namespace ferry::http
