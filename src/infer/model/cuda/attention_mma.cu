// Self-attention on the tensor cores, for f16 and bf16 heads of up to 64
// dimensions (MiniLM's are 32): flash-style, one block per (sequence, head),
// a warp per 16 query rows (eight warps: a sequence of up to 128 tokens in one
// pass), keys and values in tiles of 64, an online softmax in f32 registers,
// and no score matrix in memory. Keys past the sequence's end (rounded up to
// 16) are neither loaded nor multiplied. A long sequence's query rows may be
// split over blocks along z (query_blocks in attention_mma.h); each block then
// loads every key tile itself.
//
// Key and value tiles go from global to shared memory with cp.async, two
// buffers deep: the next tile is in flight while the warps multiply this one,
// and no thread holds them in registers on the way. That is possible because
// neither bias needs adding to them:
// - the key bias adds q . b_k to every score of a query row, the same for all
//   its keys, which the softmax cancels;
// - the value bias adds sum_j p_j b_v = b_v to a row's output (its weights sum
//   to one), so it is added once, at the end.
// The query bias is added as Q is loaded, rounded to T as the unfused Linear's
// output would be.
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
// Keys and values both sit in shared memory as rows, [key][dim]. ldmatrix
// gives S's B fragments from the key rows directly, and ldmatrix.trans gives
// P V's from the value rows (a pair down a column of V). Rows are padded by 8
// elements, which puts the 8 rows of each 8x8 matrix that ldmatrix reads in
// different banks.

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

// Sixteen bytes from global to shared memory, asynchronously; with `bytes`
// 0 nothing is read and the sixteen bytes are zeroed.
__device__ inline void cp_async16(std::uint32_t smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(bytes));
}

__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// A shared-memory pointer as the 32-bit address that ldmatrix takes.
__device__ inline std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements from shared memory: lanes 8m..8m+7 give
// the addresses of matrix m's rows, and r[m] is this lane's pair of it (row g,
// columns 2t..2t+1; with .trans, rows 2t..2t+1 of column g).
__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

// kDim: head_dim rounded up to 32 or 64; the columns past head_dim are zero in
// q, keys and values. head_dim is a multiple of 8, so a 16-byte load is never cut.
template <typename T, int kDim>
__global__ void __launch_bounds__(kThreads, 2)
    attention_mma_kernel(const T* qkv, const float* qkv_bias, const std::uint32_t* starts, int hidden,
                         int head_dim, float scale_log2, T* ctx) {
  constexpr int kStride = kDim + 8;  // a key's or value's row in shared memory
  constexpr int kTileElems = kKeyTile * kStride;
  constexpr int kSteps = kDim / 16;         // k-steps of S = Q K^T
  constexpr int kKeyTiles8 = kKeyTile / 8;  // n-tiles of S
  constexpr int kDimTiles8 = kDim / 8;      // n-tiles of O
  constexpr int kChunks = kDim / 8;         // 16-byte pieces of a key's row
  __shared__ __align__(16) T k_s[2 * kTileElems];
  __shared__ __align__(16) T v_s[2 * kTileElems];

  const std::uint32_t begin = starts[blockIdx.x];
  const int len = static_cast<int>(starts[blockIdx.x + 1] - begin);
  if (len == 0) return;  // a padding sequence of a bucketed batch (the whole block leaves)
  const int head = blockIdx.y;
  const std::size_t row_stride = 3 * static_cast<std::size_t>(hidden);
  const T* q_base = qkv + begin * row_stride + head * head_dim;
  const T* k_base = q_base + hidden;
  const T* v_base = q_base + 2 * hidden;
  const float* q_bias = qkv_bias + head * head_dim;
  const float* v_bias = q_bias + 2 * hidden;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  constexpr std::uint32_t kTileBytes = kTileElems * sizeof(T);
  const std::uint32_t k_smem = shared_address(k_s);
  const std::uint32_t v_smem = shared_address(v_s);
  // This lane's row of the matrices it addresses for ldmatrix (see below).
  const std::uint32_t k_lane = k_smem + ((lane % 8) * kStride + (lane / 8) * 8) * sizeof(T);
  const std::uint32_t v_lane =
      v_smem + ((lane / 8 % 2 * 8 + lane % 8) * kStride + (lane / 16) * 8) * sizeof(T);

  // Queues the copy of the key tile at k0 into buffer `buf`: its keys up to
  // the next multiple of 16, zeros past the sequence's end (a zero value times
  // a zero weight stays zero; garbage could be a NaN) and past head_dim.
  const auto load_tile = [&](int k0, int buf) {
    const int n = min(kKeyTile, len - k0);
    const int n16 = (n + 15) / 16 * 16;
    const std::uint32_t kt = k_smem + buf * kTileBytes;
    const std::uint32_t vt = v_smem + buf * kTileBytes;
    for (int i = threadIdx.x; i < n16 * kChunks; i += kThreads) {
      const int j = i / kChunks;
      const int d = (i % kChunks) * 8;
      const bool real = j < n && d < head_dim;
      const std::size_t at = real ? (k0 + j) * row_stride + d : 0;
      const std::uint32_t to = (j * kStride + d) * sizeof(T);
      cp_async16(kt + to, k_base + at, real ? 16 : 0);
      cp_async16(vt + to, v_base + at, real ? 16 : 0);
    }
    cp_async_commit();
  };

  for (int q0 = blockIdx.z * kQueryRows; q0 < len; q0 += gridDim.z * kQueryRows) {
    __syncthreads();  // every warp is done with the previous pass's buffers
    load_tile(0, 0);
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

    for (int k0 = 0, buf = 0; k0 < len; k0 += kKeyTile, buf ^= 1) {
      const int n = min(kKeyTile, len - k0);
      const int n16 = (n + 15) / 16 * 16;  // the keys the products read: zeros past n
      cp_async_wait<0>();                  // this tile, the only copy in flight, landed
      // ... for every thread's copies; and every warp is done with the other buffer
      __syncthreads();
      if (k0 + kKeyTile < len) load_tile(k0 + kKeyTile, buf ^ 1);  // lands while this tile is multiplied
      if (warp_active) {
        const std::uint32_t kt = k_lane + buf * kTileBytes;
        const std::uint32_t vt = v_lane + buf * kTileBytes;
        float s[kKeyTiles8][4];
#pragma unroll
        for (int nt = 0; nt < kKeyTiles8; ++nt) {
          s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
          if (nt * 8 >= n16)
            continue;  // past the tile's keys (masked below)
                       // Matrix m of a load: keys nt*8.., dims 8m.. of this 32-wide slice,
                       // which are the k-step's two B halves for two k-steps.
#pragma unroll
          for (int half = 0; half < kDim / 32; ++half) {
            std::uint32_t b[4];
            ldmatrix_x4(b, kt + (nt * 8 * kStride + half * 32) * sizeof(T));
            const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma_16816<T>(s[nt], qf[2 * half], b0);
            mma_16816<T>(s[nt], qf[2 * half + 1], b1);
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
        // O += P V, 16 keys a step. Matrix m of a load: keys 8(m%2).. of the
        // step, dims of n-tile d + m/2: B's two halves for two n-tiles of O.
#pragma unroll
        for (int kk = 0; kk < kKeyTile / 16; ++kk) {
          if (kk * 16 >= n16) break;
          const std::uint32_t a[4] = {
              pack<T>(s[2 * kk][0], s[2 * kk][1]), pack<T>(s[2 * kk][2], s[2 * kk][3]),
              pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
          for (int d = 0; d < kDimTiles8; d += 2) {
            std::uint32_t b[4];
            ldmatrix_x4_trans(b, vt + (kk * 16 * kStride + d * 8) * sizeof(T));
            const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma_16816<T>(o[d], a, b0);
            mma_16816<T>(o[d + 1], a, b1);
          }
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
        if (col < head_dim)
          store_pair(out + col,
                     float2{o[d][2 * r] * inv[r] + v_bias[col], o[d][2 * r + 1] * inv[r] + v_bias[col + 1]});
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
