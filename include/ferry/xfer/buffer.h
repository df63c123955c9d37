#pragma once
// Memory an application can register with the agent: memory the agent can reach
// from its own process. Dram is shared host memory (a memfd); Vram is a
// cudaMalloc allocation exported by CUDA IPC, or, where there is no GPU (or with
// FERRY_XFER_EMULATE_VRAM=1), shared host memory standing in for it, so that the
// same protocol and tests run on CPU-only machines.

#include <cstddef>
#include <cstdint>

#include "ferry/xfer/types.h"

namespace ferry::xfer {

class Buffer {
 public:
  // Throws ferry::Error when the memory cannot be had (size 0, no such GPU ...).
  static Buffer allocate(MemType type, std::size_t size, int device = 0);

  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // The address the application uses: a device pointer for real Vram.
  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  MemType type() const noexcept { return type_; }
  int device() const noexcept { return device_; }
  // True when the memory is in GPU memory (false for Dram and emulated Vram).
  bool on_gpu() const noexcept { return memfd_ < 0 && data_ != nullptr; }
  int memfd() const noexcept { return memfd_; }

  // Copies between host memory and the buffer, whatever kind it is (tests, the CLI).
  // write returns once the bytes are in the buffer, so a transfer posted next sees
  // them: the agent reads GPU memory from another process, outside this process's
  // stream order. (An application that fills its buffers with its own kernels
  // must synchronize them before it posts, as with NIXL.)
  void write(std::size_t offset, const void* src, std::size_t n);
  void read(std::size_t offset, void* dst, std::size_t n) const;

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t size_ = 0;
  MemType type_ = MemType::Dram;
  int device_ = 0;
  int memfd_ = -1;
};

// True when Vram buffers are real GPU memory here (a CUDA build, a device, and
// no FERRY_XFER_EMULATE_VRAM=1).
bool vram_is_gpu();

}  // namespace ferry::xfer
