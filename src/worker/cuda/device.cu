#include <cuda_runtime.h>

#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/gpu_context.h"

namespace ferry::worker::cuda {

int device_count() noexcept {
  request_eager_loading();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(const WorkerOptions& options) {
  switch (options.launch) {
    case LaunchMethod::Persistent: return make_persistent_backend(options);
    case LaunchMethod::Burst:
    case LaunchMethod::Graph:
    case LaunchMethod::Memops: return make_batched_backend(options);
    case LaunchMethod::Cpu: break;
  }
  throw Error("--launch cpu is the cpu backend's; choose persistent, burst, graph or memops with --backend cuda");
}

}  // namespace ferry::worker::cuda
