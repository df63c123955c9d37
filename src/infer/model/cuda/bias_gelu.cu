// The feed-forward block's activation: bias + GELU in place over the
// intermediate [tokens][width] matrix.

#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 256;

// One element per thread; width is a multiple of nothing in particular, so the
// column comes from a division rather than from the block layout.
template <typename T>
__global__ void bias_gelu_kernel(T* x, const float* bias, std::size_t count, unsigned width) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float v = to_float(x[i]) + bias[i % width];
  x[i] = from_float<T>(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
}

}  // namespace

template <typename T>
void launch_bias_gelu(T* x_d, const float* bias_d, std::size_t tokens, std::size_t width,
                      cudaStream_t stream) {
  const std::size_t count = tokens * width;
  if (count == 0) return;
  const auto blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  bias_gelu_kernel<T><<<blocks, kThreads, 0, stream>>>(x_d, bias_d, count, static_cast<unsigned>(width));
  check_launch("bias_gelu_kernel");
}

#define FERRY_INSTANTIATE(T) \
  template void launch_bias_gelu<T>(T*, const float*, std::size_t, std::size_t, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
