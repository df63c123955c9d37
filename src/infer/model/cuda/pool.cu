// Sentence-transformers' mean pooling: the average of each sequence's last
// hidden states, in f32. Every token counts (packed batches carry no padding).

#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 128;

// One block per sequence, a thread per column: consecutive threads read
// consecutive columns of a row, so every token's row is read coalesced.
template <typename T>
__global__ void mean_pool_kernel(const T* hidden_states, const std::uint32_t* starts, int hidden,
                                 float* out) {
  const std::uint32_t begin = starts[blockIdx.x];
  const std::uint32_t end = starts[blockIdx.x + 1];
  const float inv_len = 1.0f / static_cast<float>(end - begin);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    float sum = 0.0f;
    for (std::uint32_t t = begin; t < end; ++t)
      sum += to_float(hidden_states[static_cast<std::size_t>(t) * hidden + c]);
    out[static_cast<std::size_t>(blockIdx.x) * hidden + c] = sum * inv_len;
  }
}

}  // namespace

template <typename T>
void launch_mean_pool(const T* hidden_d, const std::uint32_t* starts_d, std::size_t sequences,
                      std::size_t hidden, float* out_d, cudaStream_t stream) {
  if (sequences == 0) return;
  mean_pool_kernel<T><<<static_cast<unsigned>(sequences), kThreads, 0, stream>>>(
      hidden_d, starts_d, static_cast<int>(hidden), out_d);
  check_launch("mean_pool_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                          \
  template void launch_mean_pool<T>(const T*, const std::uint32_t*, std::size_t, std::size_t, float*, \
                                    cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
