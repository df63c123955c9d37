#include "http/inference_metrics.h"

#include <array>
#include <vector>

#include "core/prometheus.h"
#include "ferry/infer/service.h"
#include "offload/server_metrics.h"

namespace ferry::http {
namespace {

const char* const kStageNames[] = {"request", "queue", "tokenization", "inference"};

}  // namespace

void InferenceMetrics::record(Stage stage, std::int64_t ns) noexcept {
  if (ns < 0) ns = 0;
  const double us = static_cast<double>(ns) / 1e3;
  std::size_t b = 0;
  while (us > Bounds::kBoundsUs[b]) ++b;  // the last bound is beyond any value
  Histogram& h = stages_[stage];
  h.counts[b].fetch_add(1, std::memory_order_relaxed);
  h.sum_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

void InferenceMetrics::count_inputs(std::uint64_t inputs, std::uint64_t tokens) noexcept {
  inputs_.fetch_add(inputs, std::memory_order_relaxed);
  tokens_.fetch_add(tokens, std::memory_order_relaxed);
}

std::string InferenceMetrics::render() const {
  prom::TextWriter w;
  w.family("ferry_embed_duration_seconds", "histogram",
           "Embedding requests: whole request (arrival to response built), queue (queued to batched), "
           "tokenization, inference (the model call of its batch).");
  for (int s = 0; s < kStages; ++s) {
    const Histogram& h = stages_[s];
    std::array<std::uint64_t, Bounds::kBoundsUs.size()> counts;
    for (std::size_t b = 0; b < counts.size(); ++b) counts[b] = h.counts[b].load(std::memory_order_relaxed);
    w.histogram("ferry_embed_duration_seconds", {{"stage", kStageNames[s]}}, offload::kStageBoundsSeconds,
                counts, static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) / 1e9);
  }
  w.counter("ferry_embed_inputs_total", "Inputs embedded (a batched request counts each).",
            inputs_.load(std::memory_order_relaxed));
  w.counter("ferry_embed_input_tokens_total", "Token ids of those inputs, [CLS] and [SEP] included.",
            tokens_.load(std::memory_order_relaxed));
  if (!service_) return w.take();
  const infer::ServiceStats st = service_->stats();
  w.gauge("ferry_embed_queue_size", "Sequences waiting for a batch now.", static_cast<double>(st.queued));
  w.counter("ferry_embed_batches_total", "Batches the model ran.", st.batches);
  w.counter("ferry_embed_batch_tokens_total", "Tokens in those batches.", st.batch_tokens);
  w.counter("ferry_embed_rejected_total", "Requests refused with 429 because the queue was full.",
            st.rejected_full);
  w.counter("ferry_embed_abandoned_total", "Sequences skipped because their client had gone.",
            st.skipped_abandoned);
  w.counter("ferry_embed_batch_timeouts_total",
            "Batches whose model call ran past ServiceOptions::batch_timeout.", st.timed_out_batches);
  w.counter("ferry_embed_unhealthy_total",
            "Requests answered 503 because a batch was stuck past ServiceOptions::batch_timeout or the model "
            "had faulted.",
            st.unhealthy_jobs);
  w.gauge("ferry_embed_batch_stuck", "1 while a batch has run past ServiceOptions::batch_timeout.",
          st.stuck ? 1 : 0);
  w.family("ferry_embed_batch_size", "histogram", "Sequences per batch.");
  const std::vector<std::uint64_t> sizes = service_->batch_size_histogram();
  std::vector<double> bounds;
  for (std::size_t b = 0; b + 1 < sizes.size(); ++b)
    bounds.push_back(static_cast<double>(std::uint64_t{1} << b));
  w.histogram("ferry_embed_batch_size", {}, bounds, sizes, static_cast<double>(st.sequences));
  return w.take();
}

}  // namespace ferry::http
