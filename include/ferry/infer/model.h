#pragma once
// An embedding model: token ids in, one mean-pooled vector per sequence out.
//
// Sequences travel packed, without padding (TokenBatch): the matrix products
// run over every token of the batch at once and only attention looks at
// sequence bounds, as TEI's varlen path does. Ferry ships a BERT encoder
// (all-MiniLM-L6-v2 and models of the same layout) on the CPU and on CUDA; an
// application can serve its own by implementing EmbeddingModel.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ferry::infer {

// Several token sequences back to back. Sequence i is ids[starts[i], starts[i+1]).
struct TokenBatch {
  std::vector<std::int32_t> ids;
  std::vector<std::uint32_t> starts{0};

  std::size_t size() const noexcept { return starts.size() - 1; }
  std::size_t tokens() const noexcept { return ids.size(); }
  std::size_t longest() const noexcept;
  std::span<const std::int32_t> sequence(std::size_t i) const noexcept {
    return {ids.data() + starts[i], starts[i + 1] - starts[i]};
  }
  void add(std::span<const std::int32_t> sequence);
  void clear() noexcept;
};

struct ModelInfo {
  std::string name;      // as the server reports it (/info, OpenAI's "model")
  std::size_t hidden = 0;           // the embedding's dimensions
  std::size_t max_positions = 0;    // longest sequence the position table allows
  std::size_t vocab = 0;
  std::string precision;            // "f32", "f16", "bf16"
  std::string device;               // "cpu", or the GPU's name
};

class EmbeddingModel {
 public:
  virtual ~EmbeddingModel() = default;
  virtual const ModelInfo& info() const noexcept = 0;
  // Writes batch.size() rows of info().hidden floats to out: each sequence's
  // mean-pooled last hidden state, not normalised (l2_normalize() does that).
  // Every sequence holds 1..info().max_positions ids, each below info().vocab.
  // Throws ferry::Error on a failure of the device or of the input.
  virtual void embed(const TokenBatch& batch, float* out) = 0;
};

// Scales v to unit length (a zero vector stays zero).
void l2_normalize(std::span<float> v) noexcept;

}  // namespace ferry::infer
