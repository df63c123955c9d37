// Self-attention for packed variable-length sequences on the CUDA cores, for
// f32 and for heads the tensor-core kernel (attention_mma.cu) does not take:
// one block per (sequence, head), a thread per query row. The head's keys and values pass
// through shared memory in tiles, and each thread keeps a running (online)
// softmax (max, sum, weighted values) in f32 registers, so any sequence
// length up to max_positions works with a fixed 16 KiB of shared memory
// (64 keys a tile at head_dim 32).
//
// Why a thread per query: with the key row in shared memory, all threads of a
// warp read the same address at once (a broadcast, no bank conflicts) and
// each does head_dim multiply-adds per key with no cross-thread reduction.
// At MiniLM's shapes (head_dim 32, 32..128 tokens) the matrix products should
// outweigh it (to be confirmed with a profile on the GPU).
//
// Registers hold the query and the accumulator (2 * kDim floats): fine at
// kDim 32 and 64; kDim 128 spills to local memory, correct but slower.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ferry/core/status.h"
#include "infer/model/cuda/attention_mma.h"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTileBytes = 8192;  // per matrix (keys, values) per tile

// Keys and values sit in shared memory as f32, converted once as the tile is
// loaded: converting f16 to f32 at every use would cost as many conversion
// instructions as multiply-adds, and conversions issue at a fraction of the rate.
template <int kDim>
__host__ __device__ constexpr int key_tile() {
  return kTileBytes / static_cast<int>(kDim * sizeof(float));
}

// q . row, row being kDim floats in shared memory read 16 bytes at a time
// (rows start at multiples of kDim * 4 >= 128 bytes, so aligned). Four partial
// sums keep four multiply-add chains in flight instead of one.
template <int kDim>
__device__ inline float dot_row(const float (&q)[kDim], const float* row) {
  const float4* row4 = reinterpret_cast<const float4*>(row);
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
  for (int c = 0; c < kDim / 4; ++c) {
    const float4 k = row4[c];
    s0 += q[4 * c] * k.x;
    s1 += q[4 * c + 1] * k.y;
    s2 += q[4 * c + 2] * k.z;
    s3 += q[4 * c + 3] * k.w;
  }
  return (s0 + s1) + (s2 + s3);
}

// acc += p * row.
template <int kDim>
__device__ inline void add_scaled_row(float p, const float* row, float (&acc)[kDim]) {
  const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll
  for (int c = 0; c < kDim / 4; ++c) {
    const float4 v = row4[c];
    acc[4 * c] += p * v.x;
    acc[4 * c + 1] += p * v.y;
    acc[4 * c + 2] += p * v.z;
    acc[4 * c + 3] += p * v.w;
  }
}

// kDim: head_dim rounded up to 32, 64 or 128; the columns past head_dim are
// zero in q, keys and values, so they add nothing. Scores are in log2 units
// (scale_log2 = log2(e) / sqrt(head_dim)) so that exp2f gives softmax's exp.
template <typename T, int kDim>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const T* qkv, const float* qkv_bias, const std::uint32_t* starts, int hidden,
                     int head_dim, float scale_log2, T* ctx) {
  constexpr int kTile = key_tile<kDim>();
  __shared__ __align__(16) float keys_s[kTile * kDim];
  __shared__ __align__(16) float values_s[kTile * kDim];

  const std::uint32_t begin = starts[blockIdx.x];
  const int len = static_cast<int>(starts[blockIdx.x + 1] - begin);
  const int head = blockIdx.y;
  const std::size_t row_stride = 3 * static_cast<std::size_t>(hidden);
  const T* q_base = qkv + begin * row_stride + head * head_dim;
  const T* k_base = q_base + hidden;
  const T* v_base = q_base + 2 * hidden;
  const float* q_bias = qkv_bias + head * head_dim;
  const float* k_bias = q_bias + hidden;
  const float* v_bias = q_bias + 2 * hidden;

  // Every thread runs every iteration of both loops (their bounds are the
  // same for the whole block), so the __syncthreads inside are reached by
  // all; only the per-query work is guarded by `active`.
  for (int q0 = blockIdx.z * blockDim.x; q0 < len; q0 += gridDim.z * blockDim.x) {
    const int qi = q0 + static_cast<int>(threadIdx.x);
    const bool active = qi < len;
    float q[kDim];
    float acc[kDim];
#pragma unroll
    for (int d = 0; d < kDim; ++d) {
      q[d] =
          (active && d < head_dim) ? (to_float(q_base[qi * row_stride + d]) + q_bias[d]) * scale_log2 : 0.0f;
      acc[d] = 0.0f;
    }
    float running_max = -INFINITY;
    float running_sum = 0.0f;

    for (int k0 = 0; k0 < len; k0 += kTile) {
      const int n = min(kTile, len - k0);
      __syncthreads();  // the previous tile has been read by every thread
      for (int i = threadIdx.x; i < n * kDim; i += blockDim.x) {
        const int j = i / kDim;
        const int d = i % kDim;
        const std::size_t g = (k0 + j) * row_stride + d;
        // Rounded to T after the bias, as the unfused Linear's output would be.
        keys_s[i] = d < head_dim ? to_float(from_float<T>(to_float(k_base[g]) + k_bias[d])) : 0.0f;
        values_s[i] = d < head_dim ? to_float(from_float<T>(to_float(v_base[g]) + v_bias[d])) : 0.0f;
      }
      __syncthreads();
      if (active) {
        for (int j = 0; j < n; ++j) {
          const float s = dot_row<kDim>(q, keys_s + j * kDim);
          if (s > running_max) {
            // A new maximum rescales what has been summed so far. The first
            // key always lands here: exp2f(-inf) = 0 clears the zeros.
            const float correction = exp2f(running_max - s);
            running_sum *= correction;
#pragma unroll
            for (int d = 0; d < kDim; ++d) acc[d] *= correction;
            running_max = s;
          }
          const float p = exp2f(s - running_max);
          running_sum += p;
          add_scaled_row<kDim>(p, values_s + j * kDim, acc);
        }
      }
    }

    if (active) {
      T* out = ctx + (begin + qi) * static_cast<std::size_t>(hidden) + head * head_dim;
      const float inv_sum = 1.0f / running_sum;  // running_sum >= 1: the maximum's own term is exp2(0)
#pragma unroll
      for (int d = 0; d < kDim; ++d)
        if (d < head_dim) out[d] = from_float<T>(acc[d] * inv_sum);
    }
  }
}

template <typename T, int kDim>
void launch(const T* qkv_d, const float* qkv_bias_d, const std::uint32_t* starts_d, std::size_t sequences,
            std::size_t longest, std::size_t hidden, std::size_t heads, T* ctx_d, cudaStream_t stream) {
  const std::size_t head_dim = hidden / heads;
  const float scale_log2 = attention_scale_log2(head_dim);
  const dim3 grid(static_cast<unsigned>(sequences), static_cast<unsigned>(heads),
                  query_blocks(longest, kThreads, sequences * heads));
  attention_kernel<T, kDim><<<grid, kThreads, 0, stream>>>(
      qkv_d, qkv_bias_d, starts_d, static_cast<int>(hidden), static_cast<int>(head_dim), scale_log2, ctx_d);
  check_launch("attention_kernel");
}

}  // namespace

template <typename T>
void launch_attention(const T* qkv_d, const float* qkv_bias_d, const std::uint32_t* starts_d,
                      std::size_t sequences, std::size_t longest, std::size_t hidden, std::size_t heads,
                      T* ctx_d, cudaStream_t stream) {
  if (sequences == 0) return;
  const std::size_t head_dim = hidden / heads;
  if constexpr (!std::is_same_v<T, float>) {
    if (attention_mma_fits(head_dim))
      return launch_attention_mma<T>(qkv_d, qkv_bias_d, starts_d, sequences, longest, hidden, heads, ctx_d,
                                     stream);
  }
  if (head_dim <= 32)
    launch<T, 32>(qkv_d, qkv_bias_d, starts_d, sequences, longest, hidden, heads, ctx_d, stream);
  else if (head_dim <= 64)
    launch<T, 64>(qkv_d, qkv_bias_d, starts_d, sequences, longest, hidden, heads, ctx_d, stream);
  else if (head_dim <= 128)
    launch<T, 128>(qkv_d, qkv_bias_d, starts_d, sequences, longest, hidden, heads, ctx_d, stream);
  else
    throw Error("attention: head_dim " + std::to_string(head_dim) + " exceeds the kernel's 128");
}

#define FERRY_INSTANTIATE(T)                                                                                \
  template void launch_attention<T>(const T*, const float*, const std::uint32_t*, std::size_t, std::size_t, \
                                    std::size_t, std::size_t, T*, cudaStream_t);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
