#pragma once
// Ferry's kernels for the BERT forward pass, one launcher each. Every launcher
// enqueues on `stream`, checks the launch and throws ferry::Error naming it;
// none synchronises, so all of them can be captured into a CUDA graph.
//
// Layouts: activations are row-major [tokens][width] in T (float, __half or
// __nv_bfloat16) with the batch's sequences packed back to back; starts_d
// holds sequences + 1 offsets (sequence s is tokens [starts[s], starts[s+1])).
// Biases and LayerNorm parameters are f32; all arithmetic is f32.
//
// The row kernels take `rows` (how many rows their grid covers: a batch's
// bucket when it replays a CUDA graph captured for the bucket) and tokens_d
// (the batch's real token count, in device memory: starts_d[sequences]). Rows
// from *tokens_d to rows are left as they are.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ferry/infer/model.h"

namespace ferry::infer::cuda {

// LayerNorm's widest row the kernels take: the row is gathered in shared memory.
inline constexpr std::size_t kMaxNormWidth = 8192;
// attention's widest head.
inline constexpr std::size_t kMaxHeadDim = 128;

struct EmbeddingTables {
  const void* word;        // [vocab][hidden] T
  const void* position;    // [max_positions][hidden] T
  const void* token_type;  // [type_vocab][hidden] T; row 0 is used
  const float* gamma;
  const float* beta;
  float eps;
};

// out[t] = LayerNorm(word[ids[t]] + position[t - starts[s]] + token_type[0]) for
// each token t of sequence s. The caller has checked ids and lengths.
template <typename T>
void launch_embed_norm(const std::int32_t* ids_d, const std::uint32_t* starts_d, std::size_t sequences,
                       std::size_t rows, const std::uint32_t* tokens_d, std::size_t hidden,
                       const EmbeddingTables& tables, T* out_d, cudaStream_t stream);

// x = GELU(x + bias) in place, x [tokens][width]; the exact GELU (erf), as
// BERT's "gelu" activation.
template <typename T>
void launch_bias_gelu(T* x_d, const float* bias_d, std::size_t rows, const std::uint32_t* tokens_d,
                      std::size_t width, cudaStream_t stream);

// residual = LayerNorm(x + bias + residual) in place, both [tokens][hidden].
template <typename T>
void launch_bias_residual_norm(const T* x_d, const float* bias_d, T* residual_d, const float* gamma_d,
                               const float* beta_d, float eps, std::size_t rows, const std::uint32_t* tokens_d,
                               std::size_t hidden, cudaStream_t stream);

// Self-attention over each sequence on its own (no padding, no mask).
// qkv_d: [tokens][3 * hidden], the fused projection without its bias: query
// columns [0, hidden), key [hidden, 2 hidden), value [2 hidden, 3 hidden), head h
// at h * head_dim within each. qkv_bias_d: [3 * hidden]. ctx_d: [tokens][hidden],
// the heads side by side as BERT concatenates them. head_dim <= kMaxHeadDim.
// longest: the longest sequence's tokens where the host knows it, else 0
// (query_blocks in attention_mma.h).
template <typename T>
void launch_attention(const T* qkv_d, const float* qkv_bias_d, const std::uint32_t* starts_d,
                      std::size_t sequences, std::size_t longest, std::size_t hidden, std::size_t heads,
                      T* ctx_d, cudaStream_t stream);

// out[s] = hidden_d's rows of sequence s pooled (their mean, the first row or
// the last), in f32: [sequences][hidden].
template <typename T>
void launch_pool(const T* hidden_d, const std::uint32_t* starts_d, std::size_t sequences, std::size_t hidden,
                 Pooling pooling, float* out_d, cudaStream_t stream);

// out[i] = in[i] in f32, for count elements (the token states /embed_all returns).
template <typename T>
void launch_to_f32(const T* in_d, std::size_t count, float* out_d, cudaStream_t stream);

}  // namespace ferry::infer::cuda
