// The sublayer's end in BERT's post-norm layout: projection + bias +
// residual, then LayerNorm, written over the residual.
//
// Rows of up to kMaxWarpRowWidth columns (MiniLM's 384, BERT-base's 768) take a
// warp each, their values held in registers, moved four at a time (8 bytes of
// f16, the bias, gamma and beta 16 bytes), or in pairs where the width is not a
// multiple of four: two shuffle reductions and no barrier, eight rows a block.
// Wider ones take a block each, gathered in shared memory (layer_norm_row).
//
// Why pieces of four and not 16 bytes a lane: at MiniLM's 384 columns, 48
// pieces of 16 bytes a row leave half the lanes with one piece and half with
// two, while pieces of four give every lane three. The profile that chose this
// layout over a block a row is in docs/bench/inference.md.

#include <cstdint>

#include "infer/model/cuda/block_reduce.cuh"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"
#include "infer/model/cuda/layer_norm_row.cuh"

namespace ferry::infer::cuda {
namespace {

constexpr int kRowsPerBlock = 8;
constexpr int kBlockThreads = 128;

// In place is safe: a warp reads its whole row before it writes any of it, and
// no other warp touches that row.
template <typename T, int kWidth>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    bias_residual_norm_warp_kernel(const T* x, const float* bias, T* residual, const float* gamma,
                                   const float* beta, float eps, const std::uint32_t* tokens, int rows,
                                   int hidden) {
  const int r = blockIdx.x * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  if (r >= rows || r >= static_cast<int>(*tokens)) return;
  const int lane = threadIdx.x % 32;
  const std::size_t offset = static_cast<std::size_t>(r) * hidden;
  WarpRow<kWidth> row;
#pragma unroll
  for (int i = 0; i < WarpRow<kWidth>::kPieces; ++i) {
    const int col = WarpRow<kWidth>::column(lane, i);
    if (col < hidden) {
      float a[kWidth], res[kWidth], b[kWidth];
      load_columns<kWidth>(x + offset + col, a);
      load_columns<kWidth>(residual + offset + col, res);
      load_params<kWidth>(bias + col, b);
#pragma unroll
      for (int e = 0; e < kWidth; ++e) row.v[i][e] = a[e] + b[e] + res[e];
    }
  }
  warp_layer_norm<kWidth>(row, lane, hidden, gamma, beta, eps, residual + offset);
}

template <typename T>
__global__ void bias_residual_norm_block_kernel(const T* x, const float* bias, T* residual, const float* gamma,
                                                const float* beta, float eps, const std::uint32_t* tokens,
                                                int hidden) {
  if (blockIdx.x >= *tokens) return;  // the whole block leaves, before any barrier
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
                               const float* beta_d, float eps, std::size_t rows, const std::uint32_t* tokens_d,
                               std::size_t hidden, cudaStream_t stream) {
  if (rows == 0) return;
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (hidden % 4 == 0 && hidden <= kMaxWarpRowWidth) {
    bias_residual_norm_warp_kernel<T, 4>
        <<<blocks, 32 * kRowsPerBlock, 0, stream>>>(x_d, bias_d, residual_d, gamma_d, beta_d, eps, tokens_d,
                                                    static_cast<int>(rows), static_cast<int>(hidden));
    check_launch("bias_residual_norm_warp_kernel");
    return;
  }
  if (hidden % 2 == 0 && hidden <= kMaxWarpRowWidth) {
    bias_residual_norm_warp_kernel<T, 2>
        <<<blocks, 32 * kRowsPerBlock, 0, stream>>>(x_d, bias_d, residual_d, gamma_d, beta_d, eps, tokens_d,
                                                    static_cast<int>(rows), static_cast<int>(hidden));
    check_launch("bias_residual_norm_warp_kernel");
    return;
  }
  bias_residual_norm_block_kernel<T><<<static_cast<unsigned>(rows), kBlockThreads, hidden * sizeof(float), stream>>>(
      x_d, bias_d, residual_d, gamma_d, beta_d, eps, tokens_d, static_cast<int>(hidden));
  check_launch("bias_residual_norm_block_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                                \
  template void launch_bias_residual_norm<T>(const T*, const float*, T*, const float*, const float*, float, \
                                             std::size_t, const std::uint32_t*, std::size_t, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
