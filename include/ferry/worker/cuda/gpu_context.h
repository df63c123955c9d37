#pragma once
// What every CUDA launch method needs: the chosen device (checked for the
// features the design relies on), the arena registered as mapped host memory,
// and the table of device-side channel views. Host-only header (no kernels).

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/arena.h"
#include "ferry/worker/cuda/device_ring.cuh"

namespace ferry::worker::cuda {

// Loads every kernel when the context is created rather than at first launch:
// lazy loading can deadlock against a running persistent kernel (the CUDA
// Programming Guide, "Lazy Loading", on kernels that wait for each other).
// Must run before the process's first CUDA call.
void request_eager_loading() noexcept;

class GpuContext {
 public:
  // gpu: PCI bus id ("0000:17:00.0") or device index; empty = device 0. Throws.
  explicit GpuContext(const std::string& gpu);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  // Registers the arena (cudaHostRegister, mapped) and builds the channel table.
  void register_arena(Arena& arena);

  int device() const { return device_; }
  const std::string& name() const { return name_; }
  Arena* arena() const { return arena_; }
  // Device address of a host address inside the arena.
  template <typename T>
  T* device_ptr(T* host) const {
    return reinterpret_cast<T*>(static_cast<std::uint8_t*>(arena_base_d_) +
                                (reinterpret_cast<std::uint8_t*>(host) - static_cast<std::uint8_t*>(arena_->base())));
  }
  const DeviceChannel* channels_d() const { return channels_d_; }
  const std::vector<DeviceChannel>& channels_h() const { return channels_h_; }
  std::uint32_t* stop_d() const { return device_ptr(&arena_->header()->stop); }
  std::uint32_t* error_d() const { return device_ptr(&arena_->header()->worker_error); }
  std::string describe() const;

 private:
  int device_ = 0;
  std::string name_;
  Arena* arena_ = nullptr;
  void* arena_base_d_ = nullptr;
  DeviceChannel* channels_d_ = nullptr;
  std::vector<DeviceChannel> channels_h_;  // device addresses, kept on the host too
};

}  // namespace ferry::worker::cuda
