#include "ferry/xfer/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/sealed_memfd.h"
#include "ferry/core/status.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer {

bool vram_is_gpu() {
  const char* emulate = std::getenv("FERRY_XFER_EMULATE_VRAM");
  if (emulate != nullptr && std::string(emulate) == "1") return false;
  static const bool present = gpu::available();
  return present;
}

Buffer Buffer::allocate(MemType type, std::size_t size, int device) {
  if (size == 0) throw Error("Buffer::allocate: size 0");
  if (type != MemType::Dram && type != MemType::Vram)
    throw Error(std::string("Buffer::allocate: ") + to_string(type) + " is storage, not memory");
  Buffer b;
  b.size_ = size;
  b.type_ = type;
  b.device_ = device;
  if (type == MemType::Vram && vram_is_gpu()) {
    b.data_ = gpu::alloc_device(size, device);
    return b;
  }
  // Shared host memory: the agent maps the same pages through the memfd, which
  // is sealed so that nobody can shrink it under the agent's mapping.
  b.memfd_ = create_sealed_memfd(type == MemType::Vram ? "ferry-vram-emulated" : "ferry-dram", size);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b.memfd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(std::exchange(b.memfd_, -1));
    errno = err;
    throw_errno("mapping a shared buffer of " + std::to_string(size) + " bytes");
  }
  b.data_ = p;
  return b;
}

void Buffer::release() noexcept {
  if (data_ == nullptr) return;
  if (memfd_ >= 0) {
    munmap(data_, size_);
    ::close(memfd_);
  } else {
    gpu::free_device(data_, device_);
  }
  data_ = nullptr;
  memfd_ = -1;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(o.size_),
      type_(o.type_),
      device_(o.device_),
      memfd_(std::exchange(o.memfd_, -1)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
    type_ = o.type_;
    device_ = o.device_;
    memfd_ = std::exchange(o.memfd_, -1);
  }
  return *this;
}

void Buffer::write(std::size_t offset, const void* src, std::size_t n) {
  if (offset > size_ || n > size_ - offset) throw Error("Buffer::write past the end");
  auto* dst = static_cast<std::uint8_t*>(data_) + offset;
  if (on_gpu())
    gpu::copy_to_device(dst, src, n, device_);
  else
    std::memcpy(dst, src, n);
}

void Buffer::read(std::size_t offset, void* dst, std::size_t n) const {
  if (offset > size_ || n > size_ - offset) throw Error("Buffer::read past the end");
  const auto* src = static_cast<const std::uint8_t*>(data_) + offset;
  if (on_gpu())
    gpu::copy_from_device(dst, src, n, device_);
  else
    std::memcpy(dst, src, n);
}

}  // namespace ferry::xfer
