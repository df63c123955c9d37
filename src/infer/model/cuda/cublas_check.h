#pragma once
// FERRY_CUBLAS_CHECK: FERRY_CUDA_CHECK's twin for cuBLAS calls. It throws
// ferry::Error naming the call, where it failed, and cuBLAS's reason.

#include <cublas_v2.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry::infer::cuda {

[[noreturn]] inline void throw_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  throw Error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " +
              cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

}  // namespace ferry::infer::cuda

#define FERRY_CUBLAS_CHECK(expr)                                                           \
  do {                                                                                     \
    const cublasStatus_t ferry_cublas_status_ = (expr);                                    \
    if (ferry_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::ferry::infer::cuda::throw_cublas(ferry_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)
