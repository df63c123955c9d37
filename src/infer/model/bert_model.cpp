// make_bert_model(): loads the weights once, then hands them to the CPU or the
// CUDA model (declared in ferry/infer/bert.h).
#include <memory>
#include <string>

#include "ferry/core/status.h"
#include "ferry/infer/bert.h"
#include "infer/model/bert_cpu.h"
#include "infer/model/bert_weights.h"

#if defined(FERRY_HAVE_CUDA)
// Written beside this file by the CUDA model:
//   std::unique_ptr<EmbeddingModel> make_bert_cuda_model(BertWeights weights, const BertOptions& options);
#include "infer/model/cuda/bert_cuda.h"
#endif

namespace ferry::infer {

namespace {

// The model's name as the server reports it: the folder's name
// (".../all-MiniLM-L6-v2" -> "all-MiniLM-L6-v2").
std::string model_name(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const auto slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

}  // namespace

const char* precision_name(Precision p) noexcept {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::F16: return "f16";
    case Precision::BF16: return "bf16";
  }
  return "?";
}

const char* gelu_name(Gelu g) noexcept { return g == Gelu::Exact ? "exact" : "tanh"; }

std::unique_ptr<EmbeddingModel> make_bert_model(const BertOptions& options) {
#if !defined(FERRY_HAVE_CUDA)
  // Refused before the ~90 MB file is read and hashed.
  if (options.cuda)
    throw Error("this build has no CUDA: rebuild with nvcc present, or run the model on the CPU");
#endif
  BertOptions resolved = options;
  if (!resolved.pooling) resolved.pooling = read_pooling_config(options.model_dir);
  BertWeights weights = load_bert_weights(options.model_dir, options.expected_sha256);
#if defined(FERRY_HAVE_CUDA)
  if (options.cuda) return make_bert_cuda_model(std::move(weights), resolved);
#endif
  return make_bert_cpu_model(std::move(weights), resolved, model_name(options.model_dir));
}

}  // namespace ferry::infer
