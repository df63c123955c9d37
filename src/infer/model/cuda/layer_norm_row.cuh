#pragma once
// The tails the LayerNorm kernels share: normalise one row, then scale, shift
// and store it. A row held by one warp in registers, kWidth adjacent columns a
// lane access (rows of up to kMaxWarpRowWidth columns), or gathered by a block
// in shared memory (f32).

#include "infer/model/cuda/block_reduce.cuh"
#include "infer/model/cuda/element.cuh"

namespace ferry::infer::cuda {

// The widest row a warp holds: MiniLM's 384 columns, BERT-base's 768.
inline constexpr int kMaxWarpRowWidth = 768;

// kWidth (2 or 4) adjacent columns as one access.
template <int kWidth, typename T>
__device__ inline void load_columns(const T* p, float (&v)[kWidth]) {
  if constexpr (kWidth == 4) {
    const float4 q = load_quad(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    const float2 q = load_pair(p);
    v[0] = q.x, v[1] = q.y;
  }
}

template <int kWidth>
__device__ inline void load_params(const float* p, float (&v)[kWidth]) {
  if constexpr (kWidth == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    const float2 q = *reinterpret_cast<const float2*>(p);
    v[0] = q.x, v[1] = q.y;
  }
}

template <int kWidth, typename T>
__device__ inline void store_columns(T* p, const float (&v)[kWidth]) {
  if constexpr (kWidth == 4)
    store_quad(p, float4{v[0], v[1], v[2], v[3]});
  else
    store_pair(p, float2{v[0], v[1]});
}

// The columns of a warp's row that a lane holds: piece i is columns
// kWidth * (lane + 32 i) onwards, where that is below the row's width.
template <int kWidth>
struct WarpRow {
  static constexpr int kPieces = kMaxWarpRowWidth / (32 * kWidth);
  float v[kPieces][kWidth];
  __device__ static int column(int lane, int i) { return kWidth * (lane + 32 * i); }
};

// Normalises a warp's row (every lane calls it) and stores it to `out`. Mean
// first, then the variance around it (a second pass over registers), which
// stays exact where E[x^2] - E[x]^2 would cancel.
template <int kWidth, typename T>
__device__ inline void warp_layer_norm(const WarpRow<kWidth>& row, int lane, int hidden, const float* gamma,
                                       const float* beta, float eps, T* out) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < WarpRow<kWidth>::kPieces; ++i) {
    if (WarpRow<kWidth>::column(lane, i) < hidden) {
#pragma unroll
      for (int e = 0; e < kWidth; ++e) sum += row.v[i][e];
    }
  }
  const float mean = warp_sum(sum) / hidden;
  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < WarpRow<kWidth>::kPieces; ++i) {
    if (WarpRow<kWidth>::column(lane, i) < hidden) {
#pragma unroll
      for (int e = 0; e < kWidth; ++e) {
        const float d = row.v[i][e] - mean;
        sq += d * d;
      }
    }
  }
  const float inv_std = rsqrtf(warp_sum(sq) / hidden + eps);
#pragma unroll
  for (int i = 0; i < WarpRow<kWidth>::kPieces; ++i) {
    const int col = WarpRow<kWidth>::column(lane, i);
    if (col < hidden) {
      float gm[kWidth], bt[kWidth], o[kWidth];
      load_params<kWidth>(gamma + col, gm);
      load_params<kWidth>(beta + col, bt);
#pragma unroll
      for (int e = 0; e < kWidth; ++e) o[e] = (row.v[i][e] - mean) * inv_std * gm[e] + bt[e];
      store_columns<kWidth>(out + col, o);
    }
  }
}

// row_s: `hidden` floats in shared memory, written by this block and visible
// to all its threads (the caller __syncthreads()es first). Mean first, then
// the variance around it: two passes over shared memory, which keeps the
// variance exact where E[x^2] - E[x]^2 would cancel.
template <typename T>
__device__ inline void layer_norm_row(const float* row_s, int hidden, const float* gamma, const float* beta,
                                      float eps, T* out) {
  float sum = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) sum += row_s[c];
  const float mean = block_sum(sum) / hidden;
  float sq = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const float d = row_s[c] - mean;
    sq += d * d;
  }
  const float inv_std = rsqrtf(block_sum(sq) / hidden + eps);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    out[c] = from_float<T>((row_s[c] - mean) * inv_std * gamma[c] + beta[c]);
}

}  // namespace ferry::infer::cuda
