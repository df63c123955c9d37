#pragma once
// Fixed-size, 64-byte aligned buffers for aggregation, MPI receives and the
// runs a router holds for an app whose delivery ring is full. get() reuses a
// returned buffer; it allocates only when none is free (the pool grows to what
// the traffic needs, then the data path stops allocating). Single-threaded:
// each sender owns its pool.

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace ferry::route::detail {

class BufferPool {
 public:
  explicit BufferPool(std::uint32_t bytes) : bytes_(bytes) {}
  ~BufferPool() {
    for (std::uint8_t* b : all_) std::free(b);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  std::uint8_t* get() {
    if (!free_.empty()) {
      std::uint8_t* b = free_.back();
      free_.pop_back();
      return b;
    }
    auto* b = static_cast<std::uint8_t*>(std::aligned_alloc(64, bytes_));
    if (b == nullptr) throw std::bad_alloc();
    all_.push_back(b);
    free_.reserve(all_.size());  // put() never allocates
    return b;
  }
  void put(std::uint8_t* b) noexcept { free_.push_back(b); }

  std::uint32_t buffer_bytes() const noexcept { return bytes_; }
  std::size_t allocated() const noexcept { return all_.size(); }

 private:
  std::uint32_t bytes_;
  std::vector<std::uint8_t*> all_;
  std::vector<std::uint8_t*> free_;
};

}  // namespace ferry::route::detail
