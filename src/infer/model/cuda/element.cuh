#pragma once
// The three activation and weight types the CUDA model runs in (float, half,
// bfloat16) and what the kernels and cuBLAS need to know of each: conversion
// to and from f32 (every kernel does its arithmetic in f32) and cuBLAS's
// name for the type.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>
#include <library_types.h>

namespace ferry::infer::cuda {

template <typename T>
struct Element;

template <>
struct Element<float> {
  static constexpr cudaDataType_t kCublasType = CUDA_R_32F;
  __host__ __device__ static float to_float(float v) { return v; }
  __host__ __device__ static float from_float(float v) { return v; }
};

template <>
struct Element<__half> {
  static constexpr cudaDataType_t kCublasType = CUDA_R_16F;
  __host__ __device__ static float to_float(__half v) { return __half2float(v); }
  __host__ __device__ static __half from_float(float v) { return __float2half_rn(v); }
};

template <>
struct Element<__nv_bfloat16> {
  static constexpr cudaDataType_t kCublasType = CUDA_R_16BF;
  __host__ __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

// Two adjacent elements as one 4-byte (8 for float) access: the row kernels
// read and write pairs, which halves their memory instructions. p must be
// aligned to two elements (every row and column pair index here is even).
template <typename T>
__device__ inline float2 load_pair(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float2*>(p);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(p));
  } else {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  }
}

template <typename T>
__device__ inline void store_pair(T* p, float2 v) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float2*>(p) = v;
  } else if constexpr (std::is_same_v<T, __half>) {
    *reinterpret_cast<__half2*>(p) = __float22half2_rn(v);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(p) = __float22bfloat162_rn(v);
  }
}

// Four adjacent elements as one 8-byte (16 for float) access, and four f32
// parameters as one 16-byte one. p must be aligned to four elements.
template <typename T>
__device__ inline float4 load_quad(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const float2 lo = load_pair(reinterpret_cast<const T*>(&raw.x));
    const float2 hi = load_pair(reinterpret_cast<const T*>(&raw.y));
    return float4{lo.x, lo.y, hi.x, hi.y};
  }
}

template <typename T>
__device__ inline void store_quad(T* p, float4 v) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(p) = v;
  } else {
    uint2 raw;
    store_pair(reinterpret_cast<T*>(&raw.x), float2{v.x, v.y});
    store_pair(reinterpret_cast<T*>(&raw.y), float2{v.z, v.w});
    *reinterpret_cast<uint2*>(p) = raw;
  }
}

// Sixteen bytes of elements (8 of f16/bf16, 4 of f32) as one access: what
// the streaming kernels move per thread per step. p must be 16-byte aligned.
template <typename T>
inline constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) Vec16 {
  T v[kVec16<T>];
};

template <typename T>
__device__ inline void load16(const T* p, float (&out)[kVec16<T>]) {
  const Vec16<T> x = *reinterpret_cast<const Vec16<T>*>(p);
#pragma unroll
  for (int i = 0; i < kVec16<T>; ++i) out[i] = Element<T>::to_float(x.v[i]);
}

template <typename T>
__device__ inline void store16(T* p, const float (&in)[kVec16<T>]) {
  Vec16<T> x;
#pragma unroll
  for (int i = 0; i < kVec16<T>; ++i) x.v[i] = Element<T>::from_float(in[i]);
  *reinterpret_cast<Vec16<T>*>(p) = x;
}

template <typename T>
__host__ __device__ inline float to_float(T v) {
  return Element<T>::to_float(v);
}
template <typename T>
__host__ __device__ inline T from_float(float v) {
  return Element<T>::from_float(v);
}

}  // namespace ferry::infer::cuda
