#pragma once
// check_launch: what FERRY_CUDA_CHECK is for API calls, for a kernel launch
// (which returns nothing): it throws ferry::Error naming the kernel if the
// launch was refused (bad configuration, too much shared memory, or an
// earlier asynchronous error that the context still holds).

#include <cuda_runtime.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry::infer::cuda {

inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string("launching ") + kernel + " failed: " + cudaGetErrorName(err) + " (" +
                cudaGetErrorString(err) + ")");
}

}  // namespace ferry::infer::cuda

// Instantiates a launcher template for the three element types.
#define FERRY_INSTANTIATE_FOR_ELEMENTS(MACRO) \
  MACRO(float)                                \
  MACRO(__half)                               \
  MACRO(__nv_bfloat16)
