#pragma once
// One CHECK for CUDA calls on the control path: it throws ferry::Error naming
// the call, where it failed, and CUDA's reason.

#include <cuda_runtime.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry::worker::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  throw Error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " +
              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace ferry::worker::cuda

#define FERRY_CUDA_CHECK(expr)                                                    \
  do {                                                                            \
    const cudaError_t ferry_cuda_err_ = (expr);                                   \
    if (ferry_cuda_err_ != cudaSuccess)                                           \
      ::ferry::worker::cuda::throw_cuda(ferry_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)
