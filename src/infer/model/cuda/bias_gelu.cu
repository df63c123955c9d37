// The feed-forward block's activation: bias + GELU in place over the
// intermediate [rows][width] matrix.

#include <cmath>
#include <cstdint>

#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

// Sixteen bytes per thread, a row of blocks (grid.y) per token row (grid.x): no division
// to find the column, and rows past the batch's tokens leave at once. It
// streams the matrix once each way, so 16-byte accesses are what bring it
// near the memory's rate (pairs of elements fell well short of it).
template <typename T>
__global__ void bias_gelu_kernel(T* x, const float* bias, const std::uint32_t* tokens, unsigned width) {
  constexpr int kVec = kVec16<T>;
  const unsigned row = blockIdx.x;
  if (row >= *tokens) return;
  const unsigned col = kVec * (blockIdx.y * blockDim.x + threadIdx.x);
  if (col >= width) return;
  T* p = x + static_cast<std::size_t>(row) * width + col;
  float v[kVec];
  load16(p, v);
#pragma unroll
  for (int i = 0; i < kVec; ++i) v[i] = gelu(v[i] + bias[col + i]);
  store16(p, v);
}

}  // namespace

template <typename T>
void launch_bias_gelu(T* x_d, const float* bias_d, std::size_t rows, const std::uint32_t* tokens_d,
                      std::size_t width, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr std::size_t kVec = kVec16<T>;
  if (width % kVec != 0)
    throw Error("bias_gelu: width " + std::to_string(width) + " is not a multiple of " +
                std::to_string(kVec));
  // Rows on x: y stops at 65,535, and an eager batch may have more rows.
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((width / kVec + kThreads - 1) / kThreads));
  bias_gelu_kernel<T><<<grid, kThreads, 0, stream>>>(x_d, bias_d, tokens_d, static_cast<unsigned>(width));
  check_launch("bias_gelu_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                          \
  template void launch_bias_gelu<T>(T*, const float*, std::size_t, const std::uint32_t*, std::size_t, \
                                    cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
