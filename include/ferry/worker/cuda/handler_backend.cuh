#pragma once
// Builds the CUDA backend for a handler type: include this in a .cu file and
// write FERRY_CUDA_HANDLER(MyHandler) once, at namespace scope. Host code then
// calls ferry::worker::make_cuda_backend(options, MyHandler{...}) (declared in
// ferry/worker/cuda_backend.h) from any translation unit.

#include <memory>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/batched_backend.cuh"
#include "ferry/worker/cuda/persistent_backend.cuh"
#include "ferry/worker/cuda_backend.h"

namespace ferry::worker {

template <typename Handler>
std::unique_ptr<Backend> make_cuda_backend(const WorkerOptions& options, Handler handler) {
  switch (options.launch) {
    case LaunchMethod::Persistent: return std::make_unique<cuda::PersistentBackend<Handler>>(options, handler);
    case LaunchMethod::Burst:
    case LaunchMethod::Graph:
    case LaunchMethod::Memops: return std::make_unique<cuda::BatchedBackend<Handler>>(options, handler);
    case LaunchMethod::Cpu: break;
  }
  throw Error(
      "LaunchMethod::Cpu is the cpu backend's; choose Persistent, Burst, Graph or Memops with "
      "BackendKind::Cuda");
}

}  // namespace ferry::worker

// Instantiates every launch method's kernels for Handler (a complete type).
// Write it at global namespace scope.
#define FERRY_CUDA_HANDLER(Handler)                                                                 \
  template std::unique_ptr<::ferry::worker::Backend> ferry::worker::make_cuda_backend<Handler>( \
      const ::ferry::worker::WorkerOptions&, Handler)
