// Self-attention on the tensor cores, for f16 and bf16 heads of up to 64
// dimensions (MiniLM's are 32): flash-style, one block per (sequence, head),
// a warp per 16 query rows (eight warps: a sequence of up to 128 tokens in one
// pass), keys and values in tiles of 64 through shared memory, loaded 16
// bytes a thread (tiles of 128 would need more than the 128 registers that
// let two blocks share a multiprocessor), an online softmax in f32 registers,
// and no score matrix in memory. Keys past the sequence's end (rounded up to
// 16) are neither loaded nor multiplied. A long sequence's query rows may be
// split over blocks along z (query_blocks in attention_mma.h); each block then
// loads every key tile itself.
//
// Measured on the H100 (docs/bench/inference.md): the first version, four
// warps and tiles of 64 loaded 4 bytes a thread, ran a 128 x 128 batch's
// attention at 82 us a layer, bound by the latency of its loads, not by the
// tensor cores (the work is ~3 GFLOP).
//
// Each warp computes S = Q K^T for its 16 rows and a tile's 64 keys with
// mma.sync m16n8k16 (f32 accumulators), rescales its running output by the new
// row maxima, turns S into P = exp2(S - max) in place, and adds P V with the
// same instruction. P never leaves registers: the accumulator layout of S's
// n-tiles 2k and 2k+1 is exactly the A-operand layout of the k-th 16-key step
// of P V, so no shuffle is needed (as in FlashAttention-2).
//
// Fragment layouts of m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row-major): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8, column):     b0 = (2t..2t+1, g), b1 = (2t+8..2t+9, g)
//   C (16x8, f32):        c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// B's pairs run down a column, so keys sit in shared memory as rows (K[key][dim]
// gives S's B directly) and values transposed (Vt[dim][key] gives P V's B).
// Both rows are padded by 8 elements, which puts the 8 groups' 4-byte reads in
// 32 different banks.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "infer/model/cuda/attention_mma.h"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kQueryRows = 16 * kWarps;  // a block's query rows per pass
constexpr int kKeyTile = 64;

template <typename T>
__device__ inline std::uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

// d += a * b on the tensor cores, f32 accumulation.
template <typename T>
__device__ inline void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// 2^x on the special-function unit alone. exp2f adds a range fix-up around it
// for results below 2^-126, which a softmax's weights never need: flushed to
// zero, they weigh as little.
__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// kDim: head_dim rounded up to 32 or 64; the columns past head_dim are zero in
// q, keys and values. head_dim is a multiple of 8, so a 16-byte load is never cut.
template <typename T, int kDim>
__global__ void __launch_bounds__(kThreads, 2)
    attention_mma_kernel(const T* qkv, const float* qkv_bias, const std::uint32_t* starts, int hidden,
                         int head_dim, float scale_log2, T* ctx) {
  constexpr int kKStride = kDim + 8;
  constexpr int kVStride = kKeyTile + 8;
  constexpr int kSteps = kDim / 16;         // k-steps of S = Q K^T
  constexpr int kKeyTiles8 = kKeyTile / 8;  // n-tiles of S
  constexpr int kDimTiles8 = kDim / 8;      // n-tiles of O
  __shared__ __align__(16) T k_s[kKeyTile * kKStride];
  __shared__ __align__(16) T vt_s[kDim * kVStride];

  const std::uint32_t begin = starts[blockIdx.x];
  const int len = static_cast<int>(starts[blockIdx.x + 1] - begin);
  if (len == 0) return;  // a padding sequence of a bucketed batch (the whole block leaves)
  const int head = blockIdx.y;
  const std::size_t row_stride = 3 * static_cast<std::size_t>(hidden);
  const T* q_base = qkv + begin * row_stride + head * head_dim;
  const T* k_base = q_base + hidden;
  const T* v_base = q_base + 2 * hidden;
  const float* q_bias = qkv_bias + head * head_dim;
  const float* k_bias = q_bias + hidden;
  const float* v_bias = q_bias + 2 * hidden;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;

  for (int q0 = blockIdx.z * kQueryRows; q0 < len; q0 += gridDim.z * kQueryRows) {
    const int row0 = q0 + warp * 16;  // the warp's first row
    const bool warp_active = row0 < len;
    // Q's A fragments, with the bias added and rounded to T as the unfused
    // Linear's output would be. Rows past len are zero (computed, never stored).
    std::uint32_t qf[kSteps][4];
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = row0 + g + (r % 2) * 8;
        const int col = ks * 16 + 2 * t + (r / 2) * 8;
        float2 v{0.0f, 0.0f};
        if (row < len && col < head_dim) {
          v = load_pair(q_base + row * row_stride + col);
          v.x = to_float(from_float<T>(v.x + q_bias[col]));
          v.y = to_float(from_float<T>(v.y + q_bias[col + 1]));
        }
        qf[ks][r] = pack<T>(v.x, v.y);
      }
    }
    float o[kDimTiles8][4];
#pragma unroll
    for (int d = 0; d < kDimTiles8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    float row_max[2] = {-INFINITY, -INFINITY};
    float row_sum[2] = {0.0f, 0.0f};  // this thread's share; the quad's are added at the end

    for (int k0 = 0; k0 < len; k0 += kKeyTile) {
      const int n = min(kKeyTile, len - k0);
      const int n16 = (n + 15) / 16 * 16;  // the keys the products read: zeros past n
      __syncthreads();                     // every warp is done with the previous tile
      constexpr int kChunks = kDim / 8;    // 16-byte pieces of a key's row
      for (int i = threadIdx.x; i < n16 * kChunks; i += kThreads) {
        const int j = i / kChunks;
        const int d = (i % kChunks) * 8;
        float k[8] = {}, v[8] = {};
        if (j < n && d < head_dim) {
          const std::size_t at = (k0 + j) * row_stride + d;
          load16(k_base + at, k);
          load16(v_base + at, v);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            k[e] += k_bias[d + e];
            v[e] += v_bias[d + e];
          }
        }
        store16(k_s + j * kKStride + d, k);
#pragma unroll
        for (int e = 0; e < 8; ++e) vt_s[(d + e) * kVStride + j] = from_float<T>(v[e]);
      }
      __syncthreads();
      if (!warp_active) continue;  // still at every barrier: the loop's bounds are the block's

      float s[kKeyTiles8][4];
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        if (nt * 8 >= n16) continue;  // past the tile's keys (masked below)
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks) {
          const T* kr = k_s + (nt * 8 + g) * kKStride + ks * 16 + 2 * t;
          const std::uint32_t b[2] = {*reinterpret_cast<const std::uint32_t*>(kr),
                                      *reinterpret_cast<const std::uint32_t*>(kr + 8)};
          mma_16816<T>(s[nt], qf[ks], b);
        }
      }
      // Raw scores: the scale joins the exponent's multiply-add below, one
      // instruction where a multiply and a subtraction were. Only a sequence's
      // last tile can be partial, so only there are keys masked.
      if (n < kKeyTile) {
#pragma unroll
        for (int nt = 0; nt < kKeyTiles8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (nt * 8 + 2 * t + (e % 2) >= n) s[nt][e] = -INFINITY;
        }
      }
      float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[nt][e]);
      }
      float correction[2], max_log2[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // Every tile has a key (n >= 1), so the new maximum is finite, and
        // exp2(-inf) = 0 clears the first tile's empty history.
        const float m = quad_max(tile_max[r]);
        correction[r] = fast_exp2((row_max[r] - m) * scale_log2);
        row_max[r] = m;
        max_log2[r] = m * scale_log2;
        row_sum[r] *= correction[r];
      }
#pragma unroll
      for (int d = 0; d < kDimTiles8; ++d) {
        o[d][0] *= correction[0];
        o[d][1] *= correction[0];
        o[d][2] *= correction[1];
        o[d][3] *= correction[1];
      }
#pragma unroll
      for (int nt = 0; nt < kKeyTiles8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = fast_exp2(fmaf(s[nt][e], scale_log2, -max_log2[e / 2]));
          s[nt][e] = p;
          row_sum[e / 2] += p;
        }
      }
      // O += P V, 16 keys a step.
#pragma unroll
      for (int kk = 0; kk < kKeyTile / 16; ++kk) {
        if (kk * 16 >= n16) break;
        const std::uint32_t a[4] = {pack<T>(s[2 * kk][0], s[2 * kk][1]), pack<T>(s[2 * kk][2], s[2 * kk][3]),
                                    pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int d = 0; d < kDimTiles8; ++d) {
          const T* vr = vt_s + (d * 8 + g) * kVStride + kk * 16 + 2 * t;
          const std::uint32_t b[2] = {*reinterpret_cast<const std::uint32_t*>(vr),
                                      *reinterpret_cast<const std::uint32_t*>(vr + 8)};
          mma_16816<T>(o[d], a, b);
        }
      }
    }
    if (!warp_active) continue;
    const float inv[2] = {1.0f / quad_sum(row_sum[0]), 1.0f / quad_sum(row_sum[1])};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + g + 8 * r;
      if (row >= len) continue;
      T* out = ctx + (begin + row) * static_cast<std::size_t>(hidden) + head * head_dim;
#pragma unroll
      for (int d = 0; d < kDimTiles8; ++d) {
        const int col = d * 8 + 2 * t;
        if (col < head_dim) store_pair(out + col, float2{o[d][2 * r] * inv[r], o[d][2 * r + 1] * inv[r]});
      }
    }
  }
}

template <typename T, int kDim>
void launch(const T* qkv_d, const float* qkv_bias_d, const std::uint32_t* starts_d, std::size_t sequences,
            std::size_t longest, std::size_t hidden, std::size_t heads, T* ctx_d, cudaStream_t stream) {
  const std::size_t head_dim = hidden / heads;
  const float scale_log2 = attention_scale_log2(head_dim);
  const dim3 grid(static_cast<unsigned>(sequences), static_cast<unsigned>(heads),
                  query_blocks(longest, kQueryRows, sequences * heads));
  attention_mma_kernel<T, kDim><<<grid, kThreads, 0, stream>>>(
      qkv_d, qkv_bias_d, starts_d, static_cast<int>(hidden), static_cast<int>(head_dim), scale_log2, ctx_d);
  check_launch("attention_mma_kernel");
}

}  // namespace

bool attention_mma_fits(std::size_t head_dim) {
  return head_dim % 8 == 0 && head_dim <= 64;
}

template <typename T>
void launch_attention_mma(const T* qkv_d, const float* qkv_bias_d, const std::uint32_t* starts_d,
                          std::size_t sequences, std::size_t longest, std::size_t hidden, std::size_t heads,
                          T* ctx_d, cudaStream_t stream) {
  if (hidden / heads <= 32)
    launch<T, 32>(qkv_d, qkv_bias_d, starts_d, sequences, longest, hidden, heads, ctx_d, stream);
  else
    launch<T, 64>(qkv_d, qkv_bias_d, starts_d, sequences, longest, hidden, heads, ctx_d, stream);
}

template void launch_attention_mma<__half>(const __half*, const float*, const std::uint32_t*, std::size_t,
                                           std::size_t, std::size_t, std::size_t, __half*, cudaStream_t);
template void launch_attention_mma<__nv_bfloat16>(const __nv_bfloat16*, const float*, const std::uint32_t*,
                                                  std::size_t, std::size_t, std::size_t, std::size_t,
                                                  __nv_bfloat16*, cudaStream_t);

}  // namespace ferry::infer::cuda
