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

constexpr int kPairs = 64;  // column pairs a block covers
constexpr int kGroups = 4;  // token groups a block's threads split the sequence into

// A block per (sequence, 128 columns): threadIdx.x picks a column pair,
// threadIdx.y a group that takes every kGroups-th token, so a sequence's rows
// are read by many threads at once (with one block per sequence and a thread
// per column, a 128 x 128 batch read its 12 MB at a sixth of the memory's
// rate). The groups' sums meet in shared memory. Cls and LastToken read one
// row: the mean's loop over [begin, end) is cut to it. hidden is even.
template <typename T>
__global__ void pool_kernel(const T* hidden_states, const std::uint32_t* starts, int hidden, Pooling pooling,
                            float* out) {
  __shared__ float2 partial[kGroups][kPairs];
  std::uint32_t begin = starts[blockIdx.x];
  std::uint32_t end = starts[blockIdx.x + 1];
  if (end == begin)
    return;  // a padding sequence of a bucketed batch (the whole block leaves): nobody reads its row
  if (pooling == Pooling::Cls) end = begin + 1;
  if (pooling == Pooling::LastToken) begin = end - 1;
  const int col = 2 * (blockIdx.y * kPairs + threadIdx.x);
  float2 sum{0.0f, 0.0f};
  if (col < hidden) {
    for (std::uint32_t t = begin + threadIdx.y; t < end; t += kGroups) {
      const float2 v = load_pair(hidden_states + static_cast<std::size_t>(t) * hidden + col);
      sum.x += v.x;
      sum.y += v.y;
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= hidden) return;
  for (int g = 1; g < kGroups; ++g) {
    sum.x += partial[g][threadIdx.x].x;
    sum.y += partial[g][threadIdx.x].y;
  }
  const float inv_len = 1.0f / static_cast<float>(end - begin);
  float* o = out + static_cast<std::size_t>(blockIdx.x) * hidden + col;
  o[0] = sum.x * inv_len;
  o[1] = sum.y * inv_len;
}

// A grid-stride copy of count elements to f32.
template <typename T>
__global__ void to_f32_kernel(const T* in, std::size_t count, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = to_float(in[i]);
}

}  // namespace

template <typename T>
void launch_pool(const T* hidden_d, const std::uint32_t* starts_d, std::size_t sequences, std::size_t hidden,
                 Pooling pooling, float* out_d, cudaStream_t stream) {
  if (sequences == 0) return;
  if (hidden % 2 != 0) throw Error("pool: hidden " + std::to_string(hidden) + " is odd");
  const dim3 grid(static_cast<unsigned>(sequences),
                  static_cast<unsigned>((hidden / 2 + kPairs - 1) / kPairs));
  pool_kernel<T><<<grid, dim3(kPairs, kGroups), 0, stream>>>(hidden_d, starts_d, static_cast<int>(hidden),
                                                             pooling, out_d);
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

#define FERRY_INSTANTIATE(T)                                                                              \
  template void launch_pool<T>(const T*, const std::uint32_t*, std::size_t, std::size_t, Pooling, float*, \
                               cudaStream_t);                                                             \
  template void launch_to_f32<T>(const T*, std::size_t, float*, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
