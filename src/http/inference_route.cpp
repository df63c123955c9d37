#include "http/inference_route.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstring>
#include <variant>

#include "ferry/infer/service.h"
#include "http/chunked_body.h"
#include "http/http_framing.h"
#include "infer/api/response.h"

namespace ferry::http {
namespace {

using offload::Framing;

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

std::string json_response(std::uint16_t status, std::string_view body, bool keep_alive,
                          std::string_view extra_headers) {
  std::string out;
  out.reserve(256 + extra_headers.size() + body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_phrase(status);
  out += "\r\nServer: ferry\r\nDate: ";
  const std::size_t date_at = out.size();
  out.append(kDateLen, '-');
  write_http_date(reinterpret_cast<std::uint8_t*>(out.data() + date_at));
  out += "\r\nContent-Type: application/json\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  out += body;
  return out;
}

// What one embedding request carries from the proxy thread through the batcher
// and back.
struct InferenceRoute::Call {
  infer::api::Request request;
  std::vector<infer::WordPieceTokenizer::Encoding> encodings;
  std::shared_ptr<Framing::Deferred> deferred;
  std::string peer;
  std::string line;
  bool keep_alive = true;
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

InferenceRoute::InferenceRoute(std::shared_ptr<infer::EmbeddingService> service, infer::api::Limits limits,
                               std::shared_ptr<Metrics> metrics, std::shared_ptr<AccessLog> access_log)
    : service_(std::move(service)),
      limits_(limits),
      metrics_(std::move(metrics)),
      access_log_(std::move(access_log)),
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

Framing::Written InferenceRoute::reply_now(const std::string& body, bool keep_alive, std::string_view line,
                                           const Framing::Client& client, std::uint8_t* dst,
                                           std::size_t room) const {
  constexpr std::size_t kHeadRoom = 256;  // json_response's head, with the date
  if (body.size() + kHeadRoom <= room || client.deferrer == nullptr)
    return inline_reply(200, body, keep_alive, line, client, dst, room);
  auto deferred = client.deferrer->defer();
  deferred->complete([this, body, keep_alive, peer = std::string(client.peer), line = std::string(line)] {
    std::string r = json_response(200, body, keep_alive);
    metrics_->count(200, r.size());
    if (access_log_) access_log_->write(peer, line, 200, body.size());
    return Framing::Response{std::move(r), !keep_alive};
  });
  return {0, false, 0, true};
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

Framing::Written InferenceRoute::inline_reply(std::uint16_t status, const std::string& body, bool keep_alive,
                                              std::string_view request_line, const Framing::Client& client,
                                              std::uint8_t* dst, std::size_t room) const {
  std::string extra;
  if (status == 429) extra = "Retry-After: 1\r\n";
  const std::string r = json_response(status, body, keep_alive, extra);
  const std::size_t n = std::min(r.size(), room);  // the bodies written here are small; room is >= 1 KiB
  std::memcpy(dst, r.data(), n);
  metrics_->count(status, n);
  if (access_log_) access_log_->write(client.peer, request_line, status, body.size());
  return {n, !keep_alive, 0, false};
}

Framing::Written InferenceRoute::answer(const ReplyMeta& m, std::string_view line, std::string_view query,
                                        const Framing::Client& client, std::uint8_t* dst,
                                        std::size_t room) const noexcept {
  const bool keep_alive = (m.flags & kReplyClose) == 0;
  try {
    if (!service_)
      return inline_reply(503,
                          error_json(503, "no embedding model is loaded: start ferry http with --model DIR",
                                     "Unhealthy"),
                          keep_alive, line, client, dst, room);
    const auto which = static_cast<InferenceApi>(m.page);
    if (which == InferenceApi::Info) return inline_reply(200, info_json(), keep_alive, line, client, dst, room);
    if (which == InferenceApi::OpenAiModels)
      return inline_reply(200, models_json(), keep_alive, line, client, dst, room);

    std::string body_storage;
    std::string_view body(reinterpret_cast<const char*>(client.kept.data), client.kept.size);
    if ((m.flags & kReplyChunkedBody) != 0) {
      if (!decode_chunked_body(client.kept.data, client.kept.size, body_storage))
        return inline_reply(400, error_json(400, "malformed chunked body", "Validation"), false, line, client, dst,
                            room);
      body = body_storage;
    }
    std::variant<infer::api::Request, infer::api::Error> parsed;
    switch (which) {
      case InferenceApi::Gazsi: parsed = infer::api::parse_gazsi_query(query, limits_); break;
      case InferenceApi::TeiEmbed: parsed = infer::api::parse_tei_embed(body, limits_); break;
      case InferenceApi::OpenAi: parsed = infer::api::parse_openai(body, limits_); break;
      case InferenceApi::TeiEmbedAll: parsed = infer::api::parse_tei_embed_all(body, limits_); break;
      case InferenceApi::TeiTokenize:
      case InferenceApi::TeiDecode: {
        // The tokenizer alone answers these, here on the proxy thread: no job, no queue.
        auto answered = which == InferenceApi::TeiTokenize ? tokenize_body(body) : decode_body(body);
        if (auto* e = std::get_if<infer::api::Error>(&answered))
          return inline_reply(e->status, infer::api::error_body(*e), keep_alive, line, client, dst, room);
        return reply_now(std::get<std::string>(answered), keep_alive, line, client, dst, room);
      }
      default:
        return inline_reply(500, error_json(500, "worker named an unknown API", "Backend"), false, line, client, dst,
                            room);
    }
    if (auto* e = std::get_if<infer::api::Error>(&parsed))
      return inline_reply(e->status, infer::api::error_body(*e), keep_alive, line, client, dst, room);
    return submit(m, std::move(std::get<infer::api::Request>(parsed)), line, client, dst, room);
  } catch (const std::exception& e) {
    try {
      return inline_reply(500, error_json(500, e.what(), "Backend"), false, line, client, dst, room);
    } catch (...) {
      return {0, true, 0, false};
    }
  }
}

Framing::Written InferenceRoute::submit(const ReplyMeta& m, infer::api::Request request, std::string_view line,
                                        const Framing::Client& client, std::uint8_t* dst, std::size_t room) const {
  const bool keep_alive = (m.flags & kReplyClose) == 0;
  if (client.deferrer == nullptr)  // a caller of write_response() that cannot wait for an answer
    return inline_reply(500, error_json(500, "this server cannot defer a response", "Backend"), false, line, client,
                        dst, room);
  const std::size_t hidden = service_->model_info().hidden;
  const std::size_t max_tokens = service_->options().max_tokens;
  if (request.dimensions && *request.dimensions > hidden)
    return inline_reply(422,
                        error_json(422,
                                   "dimensions " + std::to_string(*request.dimensions) + " exceeds the model's " +
                                       std::to_string(hidden),
                                   "Validation"),
                        keep_alive, line, client, dst, room);
  if (request.inputs.size() > service_->options().queue_slots)
    return inline_reply(413,
                        error_json(413,
                                   std::to_string(request.inputs.size()) + " inputs are more than the queue's " +
                                       std::to_string(service_->options().queue_slots) + " slots",
                                   "Validation"),
                        keep_alive, line, client, dst, room);

  auto call = std::make_shared<Call>();
  call->received = client.received_ns;
  call->routed = now_ns();
  call->keep_alive = keep_alive;
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
      return inline_reply(413,
                          error_json(413,
                                     "input " + std::to_string(i) + " needs " + std::to_string(enc.full_length) +
                                         " tokens, more than the " + std::to_string(max_tokens) +
                                         " allowed; send \"truncate\": true to cut it",
                                     "Validation"),
                          keep_alive, line, client, dst, room);
    job->tokens.add(ids);
    call->encodings.push_back(enc);
    tokens += ids.size();
  }
  call->tokenized = now_ns();
  if (job->token_vectors) call->starts = job->tokens.starts;
  inference_metrics_->count_inputs(request.inputs.size(), tokens);
  call->request = std::move(request);
  call->peer = std::string(client.peer);
  call->line = std::string(line);
  call->deferred = client.deferrer->defer();

  std::weak_ptr<Framing::Deferred> weak_deferred = call->deferred;
  job->abandoned = [weak_deferred] {
    auto d = weak_deferred.lock();
    return !d || d->abandoned();
  };
  job->done = [this, call](infer::EmbedJob& j) {
    call->vectors = std::move(j.vectors);
    call->error = std::move(j.error);
    call->unhealthy = j.unhealthy;
    call->batch_size = j.batch_size;
    call->queued = j.queued_ns;
    call->batched = j.batched_ns;
    call->launched = j.launched_ns;
    call->computed = j.computed_ns;
    call->deferred->complete([this, call] { return build(*call); });
  };
  const infer::Admission admitted = service_->submit(job);
  if (admitted == infer::Admission::Unhealthy) {
    // A batch is stuck past --batch-timeout, or the model has faulted: fail
    // now rather than queue behind it. The reason is the one /health gives.
    call->error = unhealthy_reason(service_->health().reason);
    call->unhealthy = true;
    call->deferred->complete([this, call] { return build(*call); });
  } else if (admitted != infer::Admission::Ok) {
    const bool full = admitted == infer::Admission::Full;
    call->deferred->complete([this, call, full] {
      const std::uint16_t status = full ? 429 : 413;
      const std::string body =
          full ? error_json(429, "the queue is full: retry later", "Overloaded")
               : error_json(413, "the request's inputs break the queue's limits", "Validation");
      std::string r = json_response(status, body, call->keep_alive, full ? "Retry-After: 1\r\n" : "");
      metrics_->count(status, r.size());
      if (access_log_) access_log_->write(call->peer, call->line, status, body.size());
      return Framing::Response{std::move(r), !call->keep_alive};
    });
  }
  return {0, false, 0, true};
}

Framing::Response InferenceRoute::build(Call& call) const {
  const std::int64_t delivered = now_ns();
  const bool keep_alive = call.keep_alive;
  if (!call.error.empty() || call.unhealthy) {
    // 503 Unhealthy: the service's fault (a stuck batch, a faulted model);
    // 424 Backend: the model's failure on this batch. TEI's codes for both.
    const std::uint16_t status = call.unhealthy ? 503 : 424;
    const std::string body = call.unhealthy ? error_json(503, call.error, "Unhealthy")
                                            : error_json(424, "the model failed: " + call.error, "Backend");
    std::string r = json_response(status, body, keep_alive);
    metrics_->count(status, r.size());
    if (access_log_) access_log_->write(call.peer, call.line, status, body.size());
    return {std::move(r), !keep_alive};
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
    case infer::api::Endpoint::TeiTokenize: break;  // answered without a job (tokenize_body)
    case infer::api::Endpoint::OpenAi:
      infer::api::write_openai(body, items, req.model.empty() ? service_->model_info().name : req.model,
                               req.base64);
      break;
  }
  const std::int64_t built = now_ns();
  const std::string headers = "x-tokenization-time: " + ms(call.tokenized - call.routed) +
                              "\r\nx-queue-time: " + ms(call.batched - call.queued) +
                              "\r\nx-inference-time: " + ms(call.computed - call.launched) +
                              "\r\nx-total-time: " + ms(built - call.received) + "\r\n";
  std::string r = json_response(200, body, keep_alive, headers);
  inference_metrics_->record(InferenceMetrics::Request, built - call.received);
  inference_metrics_->record(InferenceMetrics::Queue, call.batched - call.queued);
  inference_metrics_->record(InferenceMetrics::Tokenization, call.tokenized - call.routed);
  inference_metrics_->record(InferenceMetrics::Inference, call.computed - call.launched);
  metrics_->count(200, r.size());
  if (access_log_) access_log_->write(call.peer, call.line, 200, body.size());
  return {std::move(r), !keep_alive};
}

}  // namespace ferry::http
