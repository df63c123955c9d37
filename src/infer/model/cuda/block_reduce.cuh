#pragma once
// Sums across a warp and across a thread block, for the row-wise kernels
// (LayerNorm). block_sum must be reached by every thread of the block.

namespace ferry::infer::cuda {

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Returns the sum of v over the block to every thread. blockDim.x must be a
// multiple of 32 (at most 1024). The last __syncthreads lets a second call
// reuse `partial` without a reader of the first result seeing it overwritten.
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float total = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
    total = warp_sum(total);
    // Lane 0 read partial[0] above, before the shuffles that produced total.
    if (lane == 0) partial[0] = total;
  }
  __syncthreads();
  const float sum = partial[0];
  __syncthreads();
  return sum;
}

}  // namespace ferry::infer::cuda
