#include "http/inference_route.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <variant>

#include "ferry/infer/service.h"
#include "infer/api/response.h"

namespace ferry::http {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ms(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns < 0 ? 0 : ns) / 1e6);
  return buf;
}

// The reason a 503 gives, bounded: it comes from the model's fault() too,
// which a program hosting the library writes, and /health's answer is written
// into a response slot of fixed room. Empty when the batch that was stuck
// returned between the refusal and this read.
std::string unhealthy_reason(std::string reason) {
  constexpr std::size_t kMaxReason = 512;
  if (reason.empty()) return "the embedding model is unavailable; retry";
  if (reason.size() > kMaxReason) {
    reason.resize(kMaxReason);
    // Not in the middle of a UTF-8 sequence: drop continuation bytes and their lead.
    while (!reason.empty() && (static_cast<unsigned char>(reason.back()) & 0xC0) == 0x80) reason.pop_back();
    if (!reason.empty() && static_cast<unsigned char>(reason.back()) >= 0xC0) reason.pop_back();
    reason += "...";
  }
  return reason;
}

std::string error_json(std::uint16_t status, std::string message, std::string type) {
  return infer::api::error_body(infer::api::Error{status, std::move(message), std::move(type)});
}

}  // namespace

// What one embedding request carries from the proxy thread through the batcher
// and back.
struct InferenceRoute::Call {
  infer::api::Request request;
  std::vector<infer::WordPieceTokenizer::Encoding> encodings;
  Responder::Later later;
  std::size_t hidden = 0;
  std::vector<std::uint32_t> starts;  // /embed_all: where each input's token rows start in vectors
  // The batcher's result.
  std::vector<float> vectors;
  std::string error;
  bool unhealthy = false;  // error is the service's (503), not the model's (424)
  std::size_t batch_size = 0;
  // steady-clock ns
  std::int64_t received = 0, routed = 0, tokenized = 0, queued = 0, batched = 0, launched = 0, computed = 0;
};

InferenceRoute::InferenceRoute(std::shared_ptr<infer::EmbeddingService> service, infer::api::Limits limits)
    : service_(std::move(service)),
      limits_(limits),
      inference_metrics_(std::make_shared<InferenceMetrics>(service_)),
      created_(static_cast<std::int64_t>(std::time(nullptr))) {}

std::string InferenceRoute::info_json() const {
  if (!service_) return "{}";
  const infer::ModelInfo& m = service_->model_info();
  const infer::ServiceOptions& o = service_->options();
  std::string out = "{\"model_id\":\"" + m.name + "\",\"model_type\":\"embedding\",\"dims\":" +
                    std::to_string(m.hidden) + ",\"max_input_length\":" + std::to_string(o.max_tokens) +
                    ",\"precision\":\"" + m.precision + "\",\"device\":\"" + m.device +
                    "\",\"pooling\":\"" + infer::pooling_name(m.pooling) +
                    "\",\"max_batch\":" + std::to_string(o.max_batch) +
                    ",\"max_batch_tokens\":" + std::to_string(o.max_batch_tokens) +
                    ",\"max_wait_us\":" + std::to_string(o.max_wait.count()) +
                    ",\"queue_slots\":" + std::to_string(o.queue_slots) +
                    ",\"batch_timeout_ms\":" + std::to_string(o.batch_timeout.count()) +
                    ",\"max_client_batch_size\":" + std::to_string(limits_.max_inputs) + "}";
  return out;
}

InferenceRoute::Health InferenceRoute::health() const {
  if (!service_) return {};
  const infer::EmbeddingService::Health h = service_->health();
  if (h.ok) return {};
  return {503, "application/json", error_json(503, unhealthy_reason(h.reason), "Unhealthy")};
}

std::string InferenceRoute::models_json() const {
  std::string out;
  if (service_) infer::api::write_openai_models(out, service_->model_info().name, created_, "ferry");
  else out = R"({"object":"list","data":[]})";
  return out;
}

std::variant<std::string, infer::api::Error> InferenceRoute::tokenize_body(std::string_view body) const {
  auto parsed = infer::api::parse_tei_tokenize(body, limits_);
  if (auto* e = std::get_if<infer::api::Error>(&parsed)) return std::move(*e);
  const infer::api::Request& req = std::get<infer::api::Request>(parsed);
  const infer::WordPieceTokenizer& tokenizer = service_->tokenizer();
  std::vector<infer::WordPieceTokenizer::Token> tokens;
  std::vector<std::vector<infer::api::TokenSpan>> out(req.inputs.size());
  for (std::size_t i = 0; i < req.inputs.size(); ++i) {
    const std::string_view text = req.inputs[i];
    tokenizer.tokenize(text, req.add_special_tokens, tokens);
    out[i].reserve(tokens.size());
    for (const auto& t : tokens) {
      // A special token written in the text reads as the vocabulary's, as TEI's does.
      const std::string_view piece = t.special ? tokenizer.token_text(t.id) : text.substr(t.start, t.stop - t.start);
      out[i].push_back({t.id, piece, t.special, t.start, t.stop});
    }
  }
  std::string json;
  infer::api::write_tei_tokenize(json, out);
  return json;
}

std::variant<std::string, infer::api::Error> InferenceRoute::decode_body(std::string_view body) const {
  auto parsed = infer::api::parse_tei_decode(body, limits_);
  if (auto* e = std::get_if<infer::api::Error>(&parsed)) return std::move(*e);
  const infer::api::DecodeRequest& req = std::get<infer::api::DecodeRequest>(parsed);
  const infer::WordPieceTokenizer& tokenizer = service_->tokenizer();
  std::vector<std::string> texts;
  texts.reserve(req.ids.size());
  for (const auto& ids : req.ids) {
    // TEI's tokenizer drops an id it does not know without a word; Ferry says so.
    for (const std::int32_t id : ids)
      if (static_cast<std::size_t>(id) >= tokenizer.vocab_size())
        return infer::api::Error{422,
                                 "token id " + std::to_string(id) + " is outside the vocabulary (" +
                                     std::to_string(tokenizer.vocab_size()) + " tokens)",
                                 "Validation"};
    texts.push_back(tokenizer.decode(ids, req.skip_special_tokens));
  }
  std::string json;
  infer::api::write_tei_decode(json, texts);
  return json;
}

void InferenceRoute::answer(infer::api::Endpoint which, const RouteRequest& request, Responder& reply) const {
  try {
    answer_or_throw(which, request, reply);
  } catch (const std::exception& e) {
    if (reply.answered()) throw;
    reply.send(500, "application/json", error_json(500, e.what(), "Backend"));
  }
}

void InferenceRoute::answer_or_throw(infer::api::Endpoint which, const RouteRequest& request,
                                     Responder& reply) const {
  using infer::api::Endpoint;
  const auto refuse = [&](const infer::api::Error& e) {
    reply.send(e.status, "application/json", infer::api::error_body(e));
  };
  if (!service_)
    return refuse({503, "no embedding model is loaded: give HttpOptions::embedding a service", "Unhealthy"});
  std::variant<infer::api::Request, infer::api::Error> parsed;
  switch (which) {
    case Endpoint::Info: return reply.send(200, "application/json", info_json());
    case Endpoint::OpenAiModels: return reply.send(200, "application/json", models_json());
    case Endpoint::Gazsi: parsed = infer::api::parse_gazsi_query(request.query, limits_); break;
    case Endpoint::TeiEmbed: parsed = infer::api::parse_tei_embed(request.body, limits_); break;
    case Endpoint::OpenAi: parsed = infer::api::parse_openai(request.body, limits_); break;
    case Endpoint::TeiEmbedAll: parsed = infer::api::parse_tei_embed_all(request.body, limits_); break;
    case Endpoint::TeiTokenize:
    case Endpoint::TeiDecode: {
      // The tokenizer alone answers these, here on the proxy thread: no job, no queue.
      auto answered =
          which == Endpoint::TeiTokenize ? tokenize_body(request.body) : decode_body(request.body);
      if (auto* e = std::get_if<infer::api::Error>(&answered)) return refuse(*e);
      return reply.send(200, "application/json", std::get<std::string>(answered));
    }
  }
  if (auto* e = std::get_if<infer::api::Error>(&parsed)) return refuse(*e);
  submit(std::move(std::get<infer::api::Request>(parsed)), request, reply);
}

void InferenceRoute::submit(infer::api::Request request, const RouteRequest& http_request,
                            Responder& reply) const {
  const auto refuse = [&](std::uint16_t status, std::string message) {
    reply.send(status, "application/json", error_json(status, std::move(message), "Validation"));
  };
  const std::size_t hidden = service_->model_info().hidden;
  const std::size_t max_tokens = service_->options().max_tokens;
  if (request.dimensions && *request.dimensions > hidden)
    return refuse(422, "dimensions " + std::to_string(*request.dimensions) + " exceeds the model's " +
                           std::to_string(hidden));
  if (request.inputs.size() > service_->options().queue_slots)
    return refuse(413, std::to_string(request.inputs.size()) + " inputs are more than the queue's " +
                           std::to_string(service_->options().queue_slots) + " slots");

  auto call = std::make_shared<Call>();
  call->received = http_request.received_ns;
  call->routed = now_ns();
  call->hidden = hidden;
  auto job = std::make_shared<infer::EmbedJob>();
  job->token_vectors = request.endpoint == infer::api::Endpoint::TeiEmbedAll;
  thread_local std::vector<std::int32_t> ids;
  const infer::WordPieceTokenizer& tokenizer = service_->tokenizer();
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    ids.clear();
    const auto enc = tokenizer.encode(request.inputs[i], max_tokens, ids);
    if (enc.truncated && !request.truncate)
      return refuse(413, "input " + std::to_string(i) + " needs " + std::to_string(enc.full_length) +
                             " tokens, more than the " + std::to_string(max_tokens) +
                             " allowed; send \"truncate\": true to cut it");
    job->tokens.add(ids);
    call->encodings.push_back(enc);
    tokens += ids.size();
  }
  call->tokenized = now_ns();
  if (job->token_vectors) call->starts = job->tokens.starts;
  inference_metrics_->count_inputs(request.inputs.size(), tokens);
  call->request = std::move(request);
  call->later = reply.defer();

  job->abandoned = [later = call->later] { return later.abandoned(); };
  job->done = [this, call](infer::EmbedJob& j) {
    call->vectors = std::move(j.vectors);
    call->error = std::move(j.error);
    call->unhealthy = j.unhealthy;
    call->batch_size = j.batch_size;
    call->queued = j.queued_ns;
    call->batched = j.batched_ns;
    call->launched = j.launched_ns;
    call->computed = j.computed_ns;
    call->later.complete([this, call] { return build(*call); });
  };
  const infer::Admission admitted = service_->submit(job);
  if (admitted == infer::Admission::Unhealthy) {
    // A batch is stuck past --batch-timeout, or the model has faulted: fail
    // now rather than queue behind it. The reason is the one /health gives.
    call->error = unhealthy_reason(service_->health().reason);
    call->unhealthy = true;
    call->later.complete([this, call] { return build(*call); });
  } else if (admitted != infer::Admission::Ok) {
    const bool full = admitted == infer::Admission::Full;
    call->later.complete([full] {
      if (full)
        return RouteResponse{429, "application/json",
                             error_json(429, "the queue is full: retry later", "Overloaded"),
                             "Retry-After: 1\r\n"};
      return RouteResponse{413, "application/json",
                           error_json(413, "the request's inputs break the queue's limits", "Validation"),
                           ""};
    });
  }
}

RouteResponse InferenceRoute::build(Call& call) const {
  const std::int64_t delivered = now_ns();
  if (!call.error.empty() || call.unhealthy) {
    // 503 Unhealthy: the service's fault (a stuck batch, a faulted model);
    // 424 Backend: the model's failure on this batch. TEI's codes for both.
    if (call.unhealthy) return {503, "application/json", error_json(503, call.error, "Unhealthy"), ""};
    return {424, "application/json", error_json(424, "the model failed: " + call.error, "Backend"), ""};
  }
  const infer::api::Request& req = call.request;
  const std::size_t dims = req.dimensions.value_or(call.hidden);
  std::vector<infer::api::Embedded> items;
  std::vector<std::span<const float>> token_rows;  // /embed_all: each input's rows, as the model wrote them
  items.reserve(req.inputs.size());
  for (std::size_t i = 0; req.endpoint == infer::api::Endpoint::TeiEmbedAll && i < req.inputs.size(); ++i) {
    std::span<float> rows(call.vectors.data() + std::size_t(call.starts[i]) * call.hidden,
                          std::size_t(call.starts[i + 1] - call.starts[i]) * call.hidden);
    for (float& x : rows)
      if (!std::isfinite(x)) x = 0;
    token_rows.push_back(rows);
  }
  for (std::size_t i = 0; req.endpoint != infer::api::Endpoint::TeiEmbedAll && i < req.inputs.size(); ++i) {
    // Matryoshka: cut first, then normalise what is kept.
    std::span<float> v(call.vectors.data() + i * call.hidden, dims);
    if (req.normalize) infer::l2_normalize(v);
    for (float& x : v)
      if (!std::isfinite(x)) x = 0;
    const auto& enc = call.encodings[i];
    items.push_back({v, std::min(enc.full_length, service_->options().max_tokens), enc.truncated, enc.full_length});
  }
  std::string body;
  switch (req.endpoint) {
    case infer::api::Endpoint::Gazsi: {
      infer::api::StageTimes t;
      const std::int64_t at[] = {call.received, call.routed,   call.tokenized, call.queued, call.batched,
                                 call.launched, call.computed, delivered,      now_ns()};
      for (std::size_t k = 0; k < t.at_us.size(); ++k) t.at_us[k] = static_cast<double>(at[k] - at[0]) / 1e3;
      infer::api::write_gazsi(body, req.inputs[0], items[0], req.full,
                              static_cast<double>(call.computed - call.launched) / 1e3, call.batch_size, t);
      break;
    }
    case infer::api::Endpoint::TeiEmbed: infer::api::write_tei(body, items); break;
    case infer::api::Endpoint::TeiEmbedAll: infer::api::write_tei_embed_all(body, token_rows, call.hidden); break;
    case infer::api::Endpoint::TeiTokenize:
    case infer::api::Endpoint::TeiDecode:
    case infer::api::Endpoint::Info:
    case infer::api::Endpoint::OpenAiModels: break;  // answered without a job (answer_or_throw)
    case infer::api::Endpoint::OpenAi:
      infer::api::write_openai(body, items, req.model.empty() ? service_->model_info().name : req.model,
                               req.base64);
      break;
  }
  const std::int64_t built = now_ns();
  std::string headers = "x-tokenization-time: " + ms(call.tokenized - call.routed) +
                        "\r\nx-queue-time: " + ms(call.batched - call.queued) +
                        "\r\nx-inference-time: " + ms(call.computed - call.launched) +
                        "\r\nx-total-time: " + ms(built - call.received) + "\r\n";
  inference_metrics_->record(InferenceMetrics::Request, built - call.received);
  inference_metrics_->record(InferenceMetrics::Queue, call.batched - call.queued);
  inference_metrics_->record(InferenceMetrics::Tokenization, call.tokenized - call.routed);
  inference_metrics_->record(InferenceMetrics::Inference, call.computed - call.launched);
  return {200, "application/json", std::move(body), std::move(headers)};
}

namespace {

class EmbeddingRoute final : public Route {
 public:
  EmbeddingRoute(std::shared_ptr<const InferenceRoute> api, infer::api::Endpoint which)
      : api_(std::move(api)), which_(which) {}
  void handle(const RouteRequest& request, Responder& reply) const override {
    api_->answer(which_, request, reply);
  }

 private:
  std::shared_ptr<const InferenceRoute> api_;
  infer::api::Endpoint which_;
};

// 200 "ok", or the embedding service's reason it cannot serve.
class HealthRoute final : public Route {
 public:
  explicit HealthRoute(std::shared_ptr<const InferenceRoute> api) : api_(std::move(api)) {}
  void handle(const RouteRequest&, Responder& reply) const override {
    const InferenceRoute::Health h = api_->health();
    reply.send(h.status, h.content_type, h.body);
  }

 private:
  std::shared_ptr<const InferenceRoute> api_;
};

class MetricsRoute final : public Route {
 public:
  explicit MetricsRoute(std::shared_ptr<const Metrics> metrics) : metrics_(std::move(metrics)) {}
  void handle(const RouteRequest&, Responder& reply) const override {
    reply.send(200, "text/plain; version=0.0.4", metrics_->render());
  }

 private:
  std::shared_ptr<const Metrics> metrics_;
};

}  // namespace

std::vector<RouteBinding> builtin_routes(std::shared_ptr<const InferenceRoute> inference,
                                         std::shared_ptr<const Metrics> metrics) {
  std::vector<RouteBinding> routes;
  routes.push_back(
      {"/health", Methods::Get | Methods::Head, std::make_shared<HealthRoute>(inference), false});
  routes.push_back(
      {"/metrics", Methods::Get | Methods::Head, std::make_shared<MetricsRoute>(std::move(metrics)), false});
  for (const infer::api::EndpointPath& e : infer::api::kEndpoints)
    routes.push_back({e.path, e.post ? Methods::Post : Methods::Get,
                      std::make_shared<EmbeddingRoute>(inference, e.endpoint)});
  return routes;
}

}  // namespace ferry::http
