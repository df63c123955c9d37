#pragma once
// The BERT encoder on the CPU, in f32, with OpenBLAS's sgemm for the matrix
// products (one GEMM over every token of the batch per Linear layer) and
// plain loops for attention's softmax, LayerNorm, GELU and pooling.

#include <memory>
#include <string>

#include "ferry/infer/bert.h"
#include "ferry/infer/model.h"
#include "infer/model/bert_weights.h"

namespace ferry::infer {

// Takes the weights (fusing Q, K and V into one matrix) and allocates scratch
// for options.max_batch_tokens tokens. name is what info().name reports.
// options.cpu_threads > 0 sets OpenBLAS's thread count, for the whole process
// (OpenBLAS has one pool). The model's embed() may be called from one thread
// at a time only: it writes to its scratch buffers. Throws ferry::Error.
std::unique_ptr<EmbeddingModel> make_bert_cpu_model(BertWeights weights, const BertOptions& options,
                                                    std::string name);

}  // namespace ferry::infer
