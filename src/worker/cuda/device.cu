#include <cuda_runtime.h>

#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/cuda_backend.h"

namespace ferry::worker {

int cuda_device_count() noexcept {
  cuda::request_eager_loading();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace ferry::worker
