#pragma once
// Page-aligned heap buffers: O_DIRECT wants the memory, offset and length of
// every transfer aligned to the device's logical block (4096 covers them all).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace ferry::xfer::store {

inline constexpr std::size_t kIoAlign = 4096;

constexpr std::size_t io_round_up(std::size_t n) {
  return (n + kIoAlign - 1) & ~(kIoAlign - 1);
}
inline bool io_aligned(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (kIoAlign - 1)) == 0;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t size) { resize(size); }

  // Makes room for at least `size` bytes (rounded up to 4 KiB); old contents are
  // not kept. Throws std::bad_alloc.
  void resize(std::size_t size) {
    const std::size_t want = io_round_up(size);
    if (want <= size_) return;
    void* p = std::aligned_alloc(kIoAlign, want);
    if (p == nullptr) throw std::bad_alloc();
    mem_.reset(static_cast<std::byte*>(p));
    size_ = want;
  }
  void reset() {
    mem_.reset();
    size_ = 0;
  }
  std::byte* data() const { return mem_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> mem_;
  std::size_t size_ = 0;
};

}  // namespace ferry::xfer::store
