#pragma once
// The tail both LayerNorm kernels share: normalise one row that the block has
// gathered in shared memory (f32), then scale, shift and store it.

#include "infer/model/cuda/block_reduce.cuh"
#include "infer/model/cuda/element.cuh"

namespace ferry::infer::cuda {

// row_s: `hidden` floats in shared memory, written by this block and visible
// to all its threads (the caller __syncthreads()es first). Mean first, then
// the variance around it: two passes over shared memory, which keeps the
// variance exact where E[x^2] - E[x]^2 would cancel.
template <typename T>
__device__ inline void layer_norm_row(const float* row_s, int hidden, const float* gamma, const float* beta,
                                      float eps, T* out) {
  float sum = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) sum += row_s[c];
  const float mean = block_sum(sum) / hidden;
  float sq = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const float d = row_s[c] - mean;
    sq += d * d;
  }
  const float inv_std = rsqrtf(block_sum(sq) / hidden + eps);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    out[c] = from_float<T>((row_s[c] - mean) * inv_std * gamma[c] + beta[c]);
}

}  // namespace ferry::infer::cuda
