#pragma once
// The CUDA backend, as host code sees it: no CUDA types, so any .cpp may
// include this. The launch methods are templates on the handler, compiled by
// nvcc where they are instantiated: a user's .cu file includes
// ferry/worker/cuda/handler_backend.cuh and names the handler once,
//
//   FERRY_CUDA_HANDLER(Upper)
//
// which builds the persistent, burst, graph and memops kernels for it. Ferry's
// own built-in handlers are instantiated the same way.

#include <memory>

#include "ferry/worker/backend.h"

namespace ferry::worker {

// Number of CUDA devices, 0 when there is no driver or no device, or when
// this build has no CUDA backend (never throws).
int cuda_device_count() noexcept;

// A CUDA backend serving `handler` by options.launch (persistent, burst, graph
// or memops). Throws ferry::Error for the cpu launch method or a device that
// lacks what the design needs. Defined in ferry/worker/cuda/handler_backend.cuh.
template <typename Handler>
std::unique_ptr<Backend> make_cuda_backend(const WorkerOptions& options, Handler handler);

}  // namespace ferry::worker
