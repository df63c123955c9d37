#pragma once
// An embedding model: token ids in, one pooled vector per sequence out (or,
// for TEI's /embed_all, every token's last hidden state).
//
// Sequences travel packed, without padding (TokenBatch): the matrix products
// run over every token of the batch at once and only attention looks at
// sequence bounds, as TEI's varlen path does. Ferry ships a BERT encoder
// (all-MiniLM-L6-v2 and models of the same layout) on the CPU and on CUDA; an
// application can serve its own by implementing EmbeddingModel.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::infer {

// The batch limits the service batches to and the models size their buffers
// for, by default: one pair, so that a default service never builds a batch
// its default model was not sized for.
inline constexpr std::size_t kDefaultMaxBatch = 256;  // sequences in one batch
inline constexpr std::size_t kDefaultMaxBatchTokens =
    16384;  // tokens in one batch (TEI's --max-batch-tokens)

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

// How a sequence's last hidden states become one vector, as sentence-
// transformers' 1_Pooling/config.json names them: the mean of every token's
// (pooling_mode_mean_tokens), the [CLS] token's (pooling_mode_cls_token), or
// the last token's (pooling_mode_lasttoken).
enum class Pooling : std::uint8_t { Mean, Cls, LastToken };

// "mean", "cls", "last_token": TEI's names, as /info reports them.
const char* pooling_name(Pooling p) noexcept;
// The inverse of pooling_name(), also taking TEI's flag spelling "last-token";
// nullopt for any other name.
std::optional<Pooling> pooling_from_name(std::string_view name) noexcept;

struct ModelInfo {
  std::string name;      // as the server reports it (/info, OpenAI's "model")
  std::size_t hidden = 0;           // the embedding's dimensions
  std::size_t max_positions = 0;    // longest sequence the position table allows
  std::size_t vocab = 0;
  std::string precision;            // "f32", "f16", "bf16"
  std::string device;               // "cpu", or the GPU's name
  Pooling pooling = Pooling::Mean;  // what embed() writes
};

class EmbeddingModel {
 public:
  virtual ~EmbeddingModel() = default;
  virtual const ModelInfo& info() const noexcept = 0;
  // How many threads may be in embed() or embed_tokens() at once, each
  // running its own batch. 1 (the default): calls come one at a time.
  virtual std::size_t concurrency() const noexcept { return 1; }
  // Why this model can run no more batches (a device in a sticky error state,
  // as a CUDA context after a kernel fault), or empty while it can. The
  // service asks after a call throws, and stays unhealthy with this reason. Any thread; it must not wait for the device.
  virtual std::string fault() const { return {}; }
  // Writes batch.size() rows of info().hidden floats to out: each sequence's
  // last hidden states pooled as info().pooling says, not normalised
  // (l2_normalize() does that). Every sequence holds 1..info().max_positions
  // ids, each below info().vocab. Throws ferry::Error on a failure of the
  // device or of the input.
  virtual void embed(const TokenBatch& batch, float* out) = 0;
  // Writes batch.tokens() rows of info().hidden floats to out: every token's
  // last hidden state, in the batch's order, not pooled nor normalised (TEI's
  // /embed_all). Row 0 of a sequence is what Cls pooling returns for it, its
  // last row what LastToken pooling returns. The same input rules and errors
  // as embed().
  virtual void embed_tokens(const TokenBatch& batch, float* out) = 0;
};

// Scales v to unit length (a zero vector stays zero).
void l2_normalize(std::span<float> v) noexcept;

}  // namespace ferry::infer
