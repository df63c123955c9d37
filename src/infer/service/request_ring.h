#pragma once
// A bounded lock-free ring of many producers and one consumer (Vyukov's
// bounded queue: each cell's sequence number says whose turn it is). Proxy
// threads push, the batcher pops; neither ever takes a lock.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <utility>

namespace ferry::infer {

template <typename T>
class RequestRing {
 public:
  // capacity: rounded up to a power of two.
  explicit RequestRing(std::size_t capacity) {
    std::size_t n = 2;
    while (n < capacity) n <<= 1;
    mask_ = n - 1;
    cells_ = std::make_unique<Cell[]>(n);
    for (std::size_t i = 0; i < n; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

  bool try_push(T value) noexcept {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      const std::size_t seq = cell.sequence.load(std::memory_order_acquire);
      const auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          cell.value = std::move(value);
          cell.sequence.store(pos + 1, std::memory_order_release);  // publishes value
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // The single consumer.
  std::optional<T> try_pop() noexcept {
    Cell& cell = cells_[head_ & mask_];
    const std::size_t seq = cell.sequence.load(std::memory_order_acquire);
    if (seq != head_ + 1) return std::nullopt;  // empty, or its producer is mid-write
    T value = std::move(cell.value);
    cell.sequence.store(head_ + mask_ + 1, std::memory_order_release);  // frees the cell for the next lap
    ++head_;
    return value;
  }

 private:
  struct alignas(64) Cell {
    std::atomic<std::size_t> sequence{0};
    T value{};
  };
  std::unique_ptr<Cell[]> cells_;
  std::size_t mask_ = 0;
  alignas(64) std::atomic<std::size_t> tail_{0};
  alignas(64) std::size_t head_ = 0;
};

}  // namespace ferry::infer
