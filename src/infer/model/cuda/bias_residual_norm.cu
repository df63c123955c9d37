// The sublayer's end in BERT's post-norm layout: projection + bias +
// residual, then LayerNorm, written over the residual.
//
// Rows of up to 1024 columns (MiniLM's 384, BERT-base's 768, BERT-large's
// 1024) take a warp each, their values held in registers, moved 16 bytes at a
// time: two shuffle reductions and no barrier, eight rows a block. Others take
// a block each, gathered in shared memory (layer_norm_row).

#include <cstdint>

#include "infer/model/cuda/block_reduce.cuh"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"
#include "infer/model/cuda/layer_norm_row.cuh"

namespace ferry::infer::cuda {
namespace {

constexpr int kFloatsPerLane = 32;  // registers a lane holds its share of the row in
constexpr int kRowsPerBlock = 8;
constexpr int kBlockThreads = 128;

constexpr std::size_t kMaxWarpWidth = 32 * kFloatsPerLane;  // the widest row a warp takes (1024)

// In place is safe: a warp reads its whole row before it writes any of it, and
// no other warp touches that row. Each lane moves 16 bytes at a time.
template <typename T>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    bias_residual_norm_warp_kernel(const T* x, const float* bias, T* residual, const float* gamma,
                                   const float* beta, float eps, const std::uint32_t* tokens, int rows,
                                   int hidden) {
  constexpr int kVec = kVec16<T>;
  constexpr int kVecsPerLane = kFloatsPerLane / kVec;
  const int row = blockIdx.x * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  if (row >= rows || row >= static_cast<int>(*tokens)) return;
  const int lane = threadIdx.x % 32;
  const std::size_t offset = static_cast<std::size_t>(row) * hidden;
  float v[kVecsPerLane][kVec];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecsPerLane; ++i) {
    const int col = kVec * (lane + 32 * i);
    if (col < hidden) {
      float a[kVec], r[kVec];
      load16(x + offset + col, a);
      load16(residual + offset + col, r);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[i][e] = a[e] + bias[col + e] + r[e];
        sum += v[i][e];
      }
    }
  }
  const float mean = warp_sum(sum) / hidden;
  // The variance around the mean (a second pass over registers), which stays
  // exact where E[x^2] - E[x]^2 would cancel.
  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecsPerLane; ++i) {
    if (kVec * (lane + 32 * i) < hidden) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float d = v[i][e] - mean;
        sq += d * d;
      }
    }
  }
  const float inv_std = rsqrtf(warp_sum(sq) / hidden + eps);
#pragma unroll
  for (int i = 0; i < kVecsPerLane; ++i) {
    const int col = kVec * (lane + 32 * i);
    if (col < hidden) {
      float out[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) out[e] = (v[i][e] - mean) * inv_std * gamma[col + e] + beta[col + e];
      store16(residual + offset + col, out);
    }
  }
}

template <typename T>
__global__ void bias_residual_norm_block_kernel(const T* x, const float* bias, T* residual,
                                                const float* gamma, const float* beta, float eps,
                                                const std::uint32_t* tokens, int hidden) {
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
                               const float* beta_d, float eps, std::size_t rows,
                               const std::uint32_t* tokens_d, std::size_t hidden, cudaStream_t stream) {
  if (rows == 0) return;
  if (hidden % kVec16<T> == 0 && hidden <= kMaxWarpWidth) {
    const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    bias_residual_norm_warp_kernel<T>
        <<<blocks, 32 * kRowsPerBlock, 0, stream>>>(x_d, bias_d, residual_d, gamma_d, beta_d, eps, tokens_d,
                                                    static_cast<int>(rows), static_cast<int>(hidden));
    check_launch("bias_residual_norm_warp_kernel");
    return;
  }
  bias_residual_norm_block_kernel<T>
      <<<static_cast<unsigned>(rows), kBlockThreads, hidden * sizeof(float), stream>>>(
          x_d, bias_d, residual_d, gamma_d, beta_d, eps, tokens_d, static_cast<int>(hidden));
  check_launch("bias_residual_norm_block_kernel");
}

#define FERRY_INSTANTIATE(T)                                                                                \
  template void launch_bias_residual_norm<T>(const T*, const float*, T*, const float*, const float*, float, \
                                             std::size_t, const std::uint32_t*, std::size_t, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
