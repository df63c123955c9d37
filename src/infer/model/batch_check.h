#pragma once
// The input checks every EmbeddingModel::embed() makes before it touches a
// device, shared by the CPU and CUDA models so that both refuse the same batches.

#include <cstddef>

#include "ferry/infer/model.h"

namespace ferry::infer {

// Throws ferry::Error unless the batch is well formed (starts from 0, rising,
// ending at tokens()), holds at most max_batch sequences and max_batch_tokens
// ids, every sequence 1..info.max_positions ids long and every id in [0, info.vocab).
void check_batch(const TokenBatch& batch, const ModelInfo& info, std::size_t max_batch,
                 std::size_t max_batch_tokens);

}  // namespace ferry::infer
