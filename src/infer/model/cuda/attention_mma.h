#pragma once
// Self-attention on the tensor cores (attention_mma.cu), which launch_attention
// picks for f16 and bf16 when the head fits; the same contract as
// launch_attention in kernels.cuh.

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ferry::infer::cuda {

// Softmax's scale in log2 units, log2(e) / sqrt(head_dim), so that exp2f gives
// exp: both attention kernels score with it.
inline float attention_scale_log2(std::size_t head_dim) {
  return static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(head_dim)));
}

// The blocks each (sequence, head) gets along the grid's z: one per
// rows_per_block query rows of the longest sequence when the host knows it (a
// batch launched eagerly), else one that walks all its rows (a graph serves
// every batch of its bucket). Splitting fills a GPU that the (sequence, head)
// blocks alone leave half idle, and costs a reload of every key tile per
// block: the gain wins only while the grid leaves multiprocessors idle, so only
// grids under four blocks a multiprocessor split (docs/bench/inference.md has
// the A/B that set the bound).
inline unsigned query_blocks(std::size_t longest, std::size_t rows_per_block, std::size_t blocks) {
  if (longest <= rows_per_block) return 1;
  int device = 0, multiprocessors = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      blocks >= 4 * static_cast<std::size_t>(multiprocessors))
    return 1;
  return static_cast<unsigned>((longest + rows_per_block - 1) / rows_per_block);
}

// True when the tensor-core kernel takes heads of this width (a multiple of 8, at most 64).
bool attention_mma_fits(std::size_t head_dim);

// T: __half or __nv_bfloat16.
template <typename T>
void launch_attention_mma(const T* qkv_d, const float* qkv_bias_d, const std::uint32_t* starts_d,
                          std::size_t sequences, std::size_t longest, std::size_t hidden, std::size_t heads,
                          T* ctx_d, cudaStream_t stream);

}  // namespace ferry::infer::cuda
