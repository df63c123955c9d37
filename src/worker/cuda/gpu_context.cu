#include "ferry/worker/cuda/gpu_context.h"

#include <cctype>
#include <cstdlib>

#include "ferry/worker/cuda/cuda_check.h"

namespace ferry::worker::cuda {
namespace {

int pick_device(const std::string& gpu) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error("a CUDA backend needs a CUDA GPU, and none is visible (cudaGetDeviceCount found none)");
  }
  if (gpu.empty()) return 0;
  bool digits = true;
  for (char c : gpu) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    const int index = std::atoi(gpu.c_str());
    if (index >= count)
      throw Error("WorkerOptions::gpu " + gpu + ": there are only " + std::to_string(count) +
                  " CUDA device(s)");
    return index;
  }
  int device = -1;
  if (cudaDeviceGetByPCIBusId(&device, gpu.c_str()) != cudaSuccess) {
    cudaGetLastError();
    throw Error("WorkerOptions::gpu " + gpu + " is not the PCI address of a CUDA device (see nvidia-smi)");
  }
  return device;
}

int attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, device));
  return v;
}

}  // namespace

void request_eager_loading() noexcept { setenv("CUDA_MODULE_LOADING", "EAGER", 0); }

GpuContext::GpuContext(const std::string& gpu) {
  request_eager_loading();
  device_ = pick_device(gpu);
  FERRY_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  name_ = prop.name;
  // The channels live in host memory the GPU reads and writes over PCIe: the
  // device must map host memory. It needs no host atomics (loads and stores
  // only), so HostNativeAtomicSupported = 0, as on H100/H200, is fine.
  if (attribute(cudaDevAttrCanMapHostMemory, device_) == 0)
    throw Error(name_ + " cannot map host memory (cudaDevAttrCanMapHostMemory = 0); the GPU workers need it");
  if (attribute(cudaDevAttrUnifiedAddressing, device_) == 0)
    throw Error(name_ + " lacks unified addressing, which the mapped channels rely on");
  FERRY_CUDA_CHECK(cudaFree(nullptr));  // create the context now, eagerly loading every kernel
}

GpuContext::~GpuContext() {
  if (channels_d_ != nullptr) cudaFree(channels_d_);
  if (arena_ != nullptr) cudaHostUnregister(arena_->base());
}

void GpuContext::register_arena(Arena& arena) {
  arena_ = &arena;
  FERRY_CUDA_CHECK(cudaHostRegister(arena.base(), arena.size(), cudaHostRegisterMapped | cudaHostRegisterPortable));
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&arena_base_d_, arena.base(), 0));
  channels_h_.clear();
  for (std::uint32_t i = 0; i < arena.num_channels(); ++i) {
    const Channel ch = arena.channel(i);
    auto ring = [&](const SlotRing& r) {
      return DeviceRing{device_ptr(r.desc(0)), device_ptr(r.data(0)), device_ptr(&r.layout()->consumer.tail),
                        r.mask(), r.slot_size(), r.start_index(), 0};
    };
    channels_h_.push_back({ring(ch.requests), ring(ch.responses), device_ptr(&ch.header->handled)});
  }
  FERRY_CUDA_CHECK(cudaMalloc(&channels_d_, sizeof(DeviceChannel) * channels_h_.size()));
  FERRY_CUDA_CHECK(cudaMemcpy(channels_d_, channels_h_.data(), sizeof(DeviceChannel) * channels_h_.size(),
                              cudaMemcpyHostToDevice));
}

std::string GpuContext::describe() const {
  return name_ + " (device " + std::to_string(device_) + ", HostNativeAtomicSupported=" +
         std::to_string(attribute(cudaDevAttrHostNativeAtomicSupported, device_)) +
         ", CanUseHostPointerForRegisteredMem=" +
         std::to_string(attribute(cudaDevAttrCanUseHostPointerForRegisteredMem, device_)) + ")";
}

}  // namespace ferry::worker::cuda
