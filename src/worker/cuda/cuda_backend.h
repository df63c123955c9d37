#pragma once
// Entry points of the CUDA backend, compiled only where nvcc is found. This
// header has no CUDA types, so host-only code can include it.

#include <memory>

#include "ferry/worker/backend.h"

namespace ferry::worker::cuda {

// Number of CUDA devices, 0 when there is no driver or no device (never throws).
int device_count() noexcept;

std::unique_ptr<Backend> make_cuda_backend(const WorkerOptions& options);

// The launch methods (persistent.cu, batched.cu).
std::unique_ptr<Backend> make_persistent_backend(const WorkerOptions& options);
std::unique_ptr<Backend> make_batched_backend(const WorkerOptions& options);

}  // namespace ferry::worker::cuda
