#pragma once
// The BERT encoder on one CUDA GPU: weights uploaded once in the chosen
// precision, cuBLAS for the matrix products, Ferry's kernels for the rest
// (embeddings, LayerNorm, GELU, varlen attention, pooling), and the whole
// forward pass replayed as a CUDA graph per batch shape. make_bert_model()
// calls this when BertOptions::cuda is set; it exists only in CUDA builds.

#include <memory>

#include "ferry/infer/bert.h"
#include "infer/model/bert_weights.h"

namespace ferry::infer {

// Uploads the weights to options.gpu in options.precision and returns the
// model; throws ferry::Error when there is no such GPU ("no CUDA device ..."),
// memory runs out, or cuBLAS cannot start. The host copy of the weights is
// released when this returns.
std::unique_ptr<EmbeddingModel> make_bert_cuda_model(BertWeights weights, const BertOptions& options);

}  // namespace ferry::infer
