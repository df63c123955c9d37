#pragma once
// The three activation and weight types the CUDA model runs in (float, half,
// bfloat16) and what the kernels and cuBLAS need to know of each: conversion
// to and from f32 (every kernel does its arithmetic in f32) and cuBLAS's
// name for the type.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

template <typename T>
__host__ __device__ inline float to_float(T v) {
  return Element<T>::to_float(v);
}
template <typename T>
__host__ __device__ inline T from_float(float v) {
  return Element<T>::from_float(v);
}

}  // namespace ferry::infer::cuda
