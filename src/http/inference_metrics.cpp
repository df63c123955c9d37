#include "http/inference_metrics.h"

#include <cstdio>

#include "ferry/infer/service.h"

namespace ferry::http {
namespace {

const char* const kStageNames[] = {"request", "queue", "tokenization", "inference"};

void append_histogram_line(std::string& out, const char* stage, const char* le, std::uint64_t n) {
  out += "ferry_embed_duration_seconds_bucket{stage=\"";
  out += stage;
  out += "\",le=\"";
  out += le;
  out += "\"} " + std::to_string(n) + "\n";
}

// One counter or gauge with its HELP and TYPE lines.
void append_single(std::string& out, const char* name, const char* type, const char* help, std::uint64_t value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(value) + "\n";
}

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
  std::string out;
  char num[64];
  out += "# HELP ferry_embed_duration_seconds Embedding requests: whole request (arrival to response built), "
         "queue (queued to batched), tokenization, inference (the model call of its batch).\n";
  out += "# TYPE ferry_embed_duration_seconds histogram\n";
  for (int s = 0; s < kStages; ++s) {
    const Histogram& h = stages_[s];
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < h.counts.size(); ++b) {
      cumulative += h.counts[b].load(std::memory_order_relaxed);
      if (b + 1 == h.counts.size())
        std::snprintf(num, sizeof(num), "+Inf");
      else
        std::snprintf(num, sizeof(num), "%g", Bounds::kBoundsUs[b] / 1e6);
      append_histogram_line(out, kStageNames[s], num, cumulative);
    }
    std::snprintf(num, sizeof(num), "%.9g", static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) / 1e9);
    out += std::string("ferry_embed_duration_seconds_sum{stage=\"") + kStageNames[s] + "\"} " + num + "\n";
    out += std::string("ferry_embed_duration_seconds_count{stage=\"") + kStageNames[s] + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  append_single(out, "ferry_embed_inputs_total", "counter", "Inputs embedded (a batched request counts each).",
                inputs_.load(std::memory_order_relaxed));
  append_single(out, "ferry_embed_input_tokens_total", "counter",
                "Token ids of those inputs, [CLS] and [SEP] included.", tokens_.load(std::memory_order_relaxed));
  if (!service_) return out;
  const infer::ServiceStats st = service_->stats();
  append_single(out, "ferry_embed_queue_size", "gauge", "Sequences waiting for a batch now.", st.queued);
  append_single(out, "ferry_embed_batches_total", "counter", "Batches the model ran.", st.batches);
  append_single(out, "ferry_embed_batch_tokens_total", "counter", "Tokens in those batches.", st.batch_tokens);
  append_single(out, "ferry_embed_rejected_total", "counter",
                "Requests refused with 429 because the queue was full.", st.rejected_full);
  append_single(out, "ferry_embed_abandoned_total", "counter", "Sequences skipped because their client had gone.",
                st.skipped_abandoned);
  append_single(out, "ferry_embed_batch_timeouts_total", "counter",
                "Batches whose model call ran past --batch-timeout.", st.timed_out_batches);
  append_single(out, "ferry_embed_unhealthy_total", "counter",
                "Requests answered 503 because a batch was stuck past --batch-timeout or the model had faulted.",
                st.unhealthy_jobs);
  append_single(out, "ferry_embed_batch_stuck", "gauge", "1 while a batch has run past --batch-timeout.",
                st.stuck ? 1 : 0);
  out += "# HELP ferry_embed_batch_size Sequences per batch.\n# TYPE ferry_embed_batch_size histogram\n";
  const std::vector<std::uint64_t> sizes = service_->batch_size_histogram();
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    cumulative += sizes[b];
    const std::string le = b + 1 == sizes.size() ? "+Inf" : std::to_string(std::uint64_t{1} << b);
    out += "ferry_embed_batch_size_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += "ferry_embed_batch_size_sum " + std::to_string(st.sequences) + "\n";
  out += "ferry_embed_batch_size_count " + std::to_string(st.batches) + "\n";
  return out;
}

}  // namespace ferry::http
