#include "ferry/worker/backend.h"

#include "ferry/core/status.h"
#include "ferry/worker/cuda_backend.h"

namespace ferry::worker {

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

bool cuda_available() noexcept { return cuda_device_count() > 0; }

#if !defined(FERRY_HAVE_CUDA)
int cuda_device_count() noexcept { return 0; }
#endif

}  // namespace ferry::worker
