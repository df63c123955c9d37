#include "ferry/worker/builtin_handlers.h"

#include <array>
#include <string>

#include "ferry/core/status.h"
#include "ferry/worker/cpu_backend.h"
#include "ferry/worker/cuda_backend.h"
#include "ferry/worker/handlers.h"

namespace ferry::worker {
namespace {

constexpr std::array<std::string_view, 4> kNames = {Reverse::kName, Echo::kName, MacSwap::kName,
                                                    StallOnMarker::kName};

template <typename Handler>
std::unique_ptr<Backend> make_for(const WorkerOptions& options, Handler handler) {
  if (options.backend == BackendKind::Cpu) return make_cpu_backend(options, handler);
#if defined(FERRY_HAVE_CUDA)
  return make_cuda_backend(options, handler);  // instantiated in worker/cuda/builtin_handlers.cu
#else
  throw Error(
      "this build of ferry has no CUDA backend (nvcc was not found at configure time); use BackendKind::Cpu");
#endif
}

}  // namespace

std::span<const std::string_view> builtin_handler_names() noexcept { return kNames; }

std::unique_ptr<Backend> make_builtin_backend(std::string_view name, const WorkerOptions& options) {
  if (name == Reverse::kName) return make_for(options, Reverse{});
  if (name == Echo::kName) return make_for(options, Echo{});
  if (name == MacSwap::kName) return make_for(options, MacSwap{});
  if (name == StallOnMarker::kName) return make_for(options, StallOnMarker{});
  throw Error("unknown handler '" + std::string(name) +
              "' (choose reverse, echo, macswap, or stall for fault injection)");
}

}  // namespace ferry::worker
