// The embedding layer: word + position + token type, then LayerNorm. A warp
// per token, its row in registers four (or two) columns a lane access, where
// the width allows (layer_norm_row.cuh); else a block per token. Vector loads,
// because a block of scalar loads a token was slower (docs/bench/inference.md).

#include <cstdint>

#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"
#include "infer/model/cuda/layer_norm_row.cuh"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = 8;

// The sequence holding token t: the last s with starts[s] <= t. starts is
// sorted and starts[0] = 0 <= t, so the search always lands in [0, sequences).
__device__ int sequence_of(const std::uint32_t* starts, int sequences, std::uint32_t t) {
  int lo = 0;
  int hi = sequences - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (starts[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <typename T, int kWidth>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    embed_norm_warp_kernel(const std::int32_t* ids, const std::uint32_t* starts, int sequences, int rows,
                           int hidden, const T* word, const T* position, const T* token_type,
                           const float* gamma, const float* beta, float eps, const std::uint32_t* tokens,
                           T* out) {
  const int t = blockIdx.x * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  if (t >= rows || t >= static_cast<int>(*tokens)) return;  // a padding row of a bucketed batch
  const int lane = threadIdx.x % 32;
  const auto pos = static_cast<std::uint32_t>(t) - starts[sequence_of(starts, sequences, t)];
  const T* w = word + static_cast<std::size_t>(ids[t]) * hidden;
  const T* p = position + static_cast<std::size_t>(pos) * hidden;
  WarpRow<kWidth> row;
#pragma unroll
  for (int i = 0; i < WarpRow<kWidth>::kPieces; ++i) {
    const int col = WarpRow<kWidth>::column(lane, i);
    if (col < hidden) {
      float a[kWidth], b[kWidth], c[kWidth];
      load_columns<kWidth>(w + col, a);
      load_columns<kWidth>(p + col, b);
      load_columns<kWidth>(token_type + col, c);
#pragma unroll
      for (int e = 0; e < kWidth; ++e) row.v[i][e] = a[e] + b[e] + c[e];
    }
  }
  warp_layer_norm<kWidth>(row, lane, hidden, gamma, beta, eps, out + static_cast<std::size_t>(t) * hidden);
}

template <typename T>
__global__ void embed_norm_kernel(const std::int32_t* ids, const std::uint32_t* starts, int sequences,
                                  int hidden, const T* word, const T* position, const T* token_type,
                                  const float* gamma, const float* beta, float eps, const std::uint32_t* tokens,
                                  T* out) {
  extern __shared__ float row_s[];
  const std::uint32_t t = blockIdx.x;
  if (t >= *tokens) return;  // a padding row of a bucketed batch (the whole block leaves)
  const std::uint32_t pos = t - starts[sequence_of(starts, sequences, t)];
  const T* w = word + static_cast<std::size_t>(ids[t]) * hidden;
  const T* p = position + static_cast<std::size_t>(pos) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    row_s[c] = to_float(w[c]) + to_float(p[c]) + to_float(token_type[c]);
  __syncthreads();
  layer_norm_row(row_s, hidden, gamma, beta, eps, out + static_cast<std::size_t>(t) * hidden);
}

}  // namespace

template <typename T>
void launch_embed_norm(const std::int32_t* ids_d, const std::uint32_t* starts_d, std::size_t sequences,
                       std::size_t rows, const std::uint32_t* tokens_d, std::size_t hidden,
                       const EmbeddingTables& tables, T* out_d, cudaStream_t stream) {
  if (rows == 0) return;
  const auto word = static_cast<const T*>(tables.word);
  const auto position = static_cast<const T*>(tables.position);
  const auto token_type = static_cast<const T*>(tables.token_type);
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto warp_launch = [&](auto kernel) {
    kernel<<<blocks, 32 * kRowsPerBlock, 0, stream>>>(
        ids_d, starts_d, static_cast<int>(sequences), static_cast<int>(rows), static_cast<int>(hidden), word,
        position, token_type, tables.gamma, tables.beta, tables.eps, tokens_d, out_d);
    check_launch("embed_norm_warp_kernel");
  };
  if (hidden % 4 == 0 && hidden <= kMaxWarpRowWidth) return warp_launch(embed_norm_warp_kernel<T, 4>);
  if (hidden % 2 == 0 && hidden <= kMaxWarpRowWidth) return warp_launch(embed_norm_warp_kernel<T, 2>);
  embed_norm_kernel<T><<<static_cast<unsigned>(rows), kThreads, hidden * sizeof(float), stream>>>(
      ids_d, starts_d, static_cast<int>(sequences), static_cast<int>(hidden), word, position, token_type,
      tables.gamma, tables.beta, tables.eps, tokens_d, out_d);
  check_launch("embed_norm_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                              \
  template void launch_embed_norm<T>(const std::int32_t*, const std::uint32_t*, std::size_t, std::size_t, \
                                     const std::uint32_t*, std::size_t, const EmbeddingTables&, T*, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
