#include "ferry/worker/backend.h"

#include "ferry/core/status.h"
#include "worker/cpu_backend.h"
#if defined(FERRY_HAVE_CUDA)
#include "worker/cuda/cuda_backend.h"
#endif

namespace ferry::worker {

HandlerKind parse_handler(std::string_view name) {
  if (name == "reverse") return HandlerKind::Reverse;
  if (name == "echo") return HandlerKind::Echo;
  if (name == "macswap") return HandlerKind::MacSwap;
  if (name == "stall") return HandlerKind::Stall;
  throw Error("unknown handler '" + std::string(name) + "' (choose reverse, echo, macswap, or stall for fault injection)");
}

const char* to_string(HandlerKind kind) noexcept {
  switch (kind) {
    case HandlerKind::Reverse: return "reverse";
    case HandlerKind::Echo: return "echo";
    case HandlerKind::MacSwap: return "macswap";
    case HandlerKind::Stall: return "stall";
  }
  return "?";
}

BackendKind parse_backend(std::string_view name) {
  if (name == "cpu") return BackendKind::Cpu;
  if (name == "cuda") return BackendKind::Cuda;
  throw Error("unknown backend '" + std::string(name) + "' (choose cpu or cuda)");
}

LaunchMethod parse_launch(std::string_view name) {
  if (name == "cpu") return LaunchMethod::Cpu;
  if (name == "persistent") return LaunchMethod::Persistent;
  if (name == "burst") return LaunchMethod::Burst;
  if (name == "graph") return LaunchMethod::Graph;
  if (name == "memops") return LaunchMethod::Memops;
  throw Error("unknown launch method '" + std::string(name) +
              "' (choose persistent, burst, graph or memops)");
}

const char* to_string(BackendKind kind) noexcept {
  return kind == BackendKind::Cpu ? "cpu" : "cuda";
}

const char* to_string(LaunchMethod method) noexcept {
  switch (method) {
    case LaunchMethod::Cpu: return "cpu";
    case LaunchMethod::Persistent: return "persistent";
    case LaunchMethod::Burst: return "burst";
    case LaunchMethod::Graph: return "graph";
    case LaunchMethod::Memops: return "memops";
  }
  return "?";
}

bool cuda_available() noexcept {
#if defined(FERRY_HAVE_CUDA)
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const WorkerOptions& options) {
  if (options.backend == BackendKind::Cpu) return std::make_unique<CpuBackend>(options);
#if defined(FERRY_HAVE_CUDA)
  return cuda::make_cuda_backend(options);
#else
  throw Error("this build of ferry has no CUDA backend (nvcc was not found at configure time); "
              "use --backend cpu");
#endif
}

}  // namespace ferry::worker
