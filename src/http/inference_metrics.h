#pragma once
// The embedding APIs' share of /metrics: request, queue, tokenization and
// inference durations, queue size, batch sizes and tokens (TEI reports the
// same quantities). Proxy threads record; /metrics renders.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/offload/server.h"

namespace ferry::infer {
class EmbeddingService;
}

namespace ferry::http {

class InferenceMetrics {
 public:
  enum Stage { Request, Queue, Tokenization, Inference, kStages };

  explicit InferenceMetrics(std::shared_ptr<const infer::EmbeddingService> service) : service_(std::move(service)) {}

  void record(Stage stage, std::int64_t ns) noexcept;
  void count_inputs(std::uint64_t inputs, std::uint64_t tokens) noexcept;
  std::string render() const;

 private:
  using Bounds = offload::StageLatency;
  struct Histogram {
    std::array<std::atomic<std::uint64_t>, Bounds::kBoundsUs.size()> counts{};
    std::atomic<std::uint64_t> sum_ns{0};
  };
  std::shared_ptr<const infer::EmbeddingService> service_;
  std::array<Histogram, kStages> stages_;
  std::atomic<std::uint64_t> inputs_{0};
  std::atomic<std::uint64_t> tokens_{0};
};

}  // namespace ferry::http
