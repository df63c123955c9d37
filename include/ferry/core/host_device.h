#pragma once
// Qualifiers that let one source serve the CPU and the CUDA backends.

#if defined(__CUDACC__)
#define FERRY_HOST_DEVICE __host__ __device__
#define FERRY_DEVICE __device__
#define FERRY_FORCE_INLINE __forceinline__
#else
#define FERRY_HOST_DEVICE
#define FERRY_DEVICE
#define FERRY_FORCE_INLINE inline
#endif
