#pragma once
// The CUDA driver calls the launch methods need (stream memory operations),
// reached through cudaGetDriverEntryPointByVersion rather than by linking
// libcuda, so that a binary still starts on a machine without a GPU driver.

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"

namespace ferry::worker::cuda {

using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using StreamWriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

template <typename Fn>
Fn driver_entry_point(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  FERRY_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error(std::string("the CUDA driver has no ") + symbol + ", which the memops launch method needs");
  return reinterpret_cast<Fn>(fn);
}

inline void check_driver(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw Error(std::string(what) + " failed with CUresult " + std::to_string(r));
}

}  // namespace ferry::worker::cuda
