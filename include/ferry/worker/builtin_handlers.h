#pragma once
// The handlers Ferry ships (handlers.h), by the names the CLI's --handler and
// the benchmarks use. Each is served through the same public route as a
// user's handler: make_cpu_backend() and make_cuda_backend().

#include <memory>
#include <span>
#include <string_view>

#include "ferry/worker/backend.h"

namespace ferry::worker {

// "reverse", "echo", "macswap" and "stall" (fault injection).
std::span<const std::string_view> builtin_handler_names() noexcept;

// The backend options.backend names, serving the built-in handler `name`.
// Throws ferry::Error for an unknown name (listing the choices), or for cuda in
// a build without the CUDA backend.
std::unique_ptr<Backend> make_builtin_backend(std::string_view name, const WorkerOptions& options);

}  // namespace ferry::worker
