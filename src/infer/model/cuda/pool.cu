// Sentence-transformers' poolings of each sequence's last hidden states, in
// f32: the mean of every token's (packed batches carry no padding, so every
// token counts), the first token's ([CLS]) or the last token's; and, for TEI's
// /embed_all, every token's state as it is.

#include <algorithm>

#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 128;

// One block per sequence, a thread per column: consecutive threads read
// consecutive columns of a row, so every token's row is read coalesced. Cls and
// LastToken read one row: the mean's loop over [begin, end) is cut to it.
template <typename T>
__global__ void pool_kernel(const T* hidden_states, const std::uint32_t* starts, int hidden, Pooling pooling,
                            float* out) {
  std::uint32_t begin = starts[blockIdx.x];
  std::uint32_t end = starts[blockIdx.x + 1];
  if (end == begin) return;  // a padding sequence of a bucketed batch: nobody reads its row
  if (pooling == Pooling::Cls) end = begin + 1;
  if (pooling == Pooling::LastToken) begin = end - 1;
  const float inv_len = 1.0f / static_cast<float>(end - begin);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    float sum = 0.0f;
    for (std::uint32_t t = begin; t < end; ++t)
      sum += to_float(hidden_states[static_cast<std::size_t>(t) * hidden + c]);
    out[static_cast<std::size_t>(blockIdx.x) * hidden + c] = sum * inv_len;
  }
}

// A grid-stride copy of count elements to f32.
template <typename T>
__global__ void to_f32_kernel(const T* in, std::size_t count, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = to_float(in[i]);
}

}  // namespace

template <typename T>
void launch_pool(const T* hidden_d, const std::uint32_t* starts_d, std::size_t sequences, std::size_t hidden,
                 Pooling pooling, float* out_d, cudaStream_t stream) {
  if (sequences == 0) return;
  pool_kernel<T><<<static_cast<unsigned>(sequences), kThreads, 0, stream>>>(hidden_d, starts_d,
                                                                            static_cast<int>(hidden), pooling, out_d);
  check_launch("pool_kernel");
}

template <typename T>
void launch_to_f32(const T* in_d, std::size_t count, float* out_d, cudaStream_t stream) {
  if (count == 0) return;
  constexpr std::size_t kThreadsPerBlock = 256;
  constexpr std::size_t kMaxBlocks = 1024;  // the grid strides past this
  const std::size_t blocks = std::min(kMaxBlocks, (count + kThreadsPerBlock - 1) / kThreadsPerBlock);
  to_f32_kernel<T><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(in_d, count, out_d);
  check_launch("to_f32_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                                \
  template void launch_pool<T>(const T*, const std::uint32_t*, std::size_t, std::size_t, Pooling, float*, \
                               cudaStream_t);                                                              \
  template void launch_to_f32<T>(const T*, std::size_t, float*, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
