// The sublayer's end in BERT's post-norm layout: projection + bias +
// residual, then LayerNorm, one block per token, written over the residual.

#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"
#include "infer/model/cuda/layer_norm_row.cuh"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 128;

// In place is safe: each block reads its whole row into shared memory before
// layer_norm_row writes any of it, and no other block touches that row.
template <typename T>
__global__ void bias_residual_norm_kernel(const T* x, const float* bias, T* residual, const float* gamma,
                                          const float* beta, float eps, int hidden) {
  extern __shared__ float row_s[];
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    row_s[c] = to_float(x[offset + c]) + bias[c] + to_float(residual[offset + c]);
  __syncthreads();
  layer_norm_row(row_s, hidden, gamma, beta, eps, residual + offset);
}

}  // namespace

template <typename T>
void launch_bias_residual_norm(const T* x_d, const float* bias_d, T* residual_d, const float* gamma_d,
                               const float* beta_d, float eps, std::size_t tokens, std::size_t hidden,
                               cudaStream_t stream) {
  if (tokens == 0) return;
  bias_residual_norm_kernel<T><<<static_cast<unsigned>(tokens), kThreads, hidden * sizeof(float), stream>>>(
      x_d, bias_d, residual_d, gamma_d, beta_d, eps, static_cast<int>(hidden));
  check_launch("bias_residual_norm_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                                \
  template void launch_bias_residual_norm<T>(const T*, const float*, T*, const float*, const float*, float, \
                                             std::size_t, std::size_t, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
