#include "xfer/store/dram/pool_allocator.h"

#include <cassert>

#include "ferry/core/status.h"

namespace ferry::xfer::store {

PoolAllocator::PoolAllocator(std::uint64_t size, std::uint64_t align) : size_(size), align_(align) {
  if (align == 0 || (align & (align - 1)) != 0) throw Error("pool alignment must be a power of two");
  if (size % align != 0) throw Error("pool size must be a multiple of its alignment");
  if (size > 0) insert(0, size);
}

std::optional<std::uint64_t> PoolAllocator::allocate(std::uint64_t n) {
  assert(n > 0);
  const std::uint64_t len = rounded(n);
  if (len < n) return std::nullopt;  // n was within align of 2^64
  // The first range of length >= len: the smallest that fits, lowest offset on ties.
  auto it = by_size_.lower_bound({len, 0});
  if (it == by_size_.end()) return std::nullopt;
  const auto [range_len, offset] = *it;
  by_size_.erase(it);
  by_offset_.erase(offset);
  free_bytes_ -= range_len;
  if (range_len > len) insert(offset + len, range_len - len);  // the rest stays free
  return offset;
}

void PoolAllocator::free(std::uint64_t offset, std::uint64_t n) {
  std::uint64_t start = offset;
  std::uint64_t len = rounded(n);
  assert(start + len <= size_);
  // Merge with the free range that ends where this one starts ...
  auto next = by_offset_.lower_bound(start);
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    assert(prev->first + prev->second <= start && "double free or overlapping ranges");
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      by_size_.erase({prev->second, prev->first});
      free_bytes_ -= prev->second;
      by_offset_.erase(prev);
    }
  }
  // ... and with the one that starts where it ends.
  if (next != by_offset_.end()) {
    assert(offset + rounded(n) <= next->first && "double free or overlapping ranges");
    if (next->first == start + len) {
      len += next->second;
      by_size_.erase({next->second, next->first});
      free_bytes_ -= next->second;
      by_offset_.erase(next);
    }
  }
  insert(start, len);
}

std::uint64_t PoolAllocator::largest_free() const {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

void PoolAllocator::insert(std::uint64_t offset, std::uint64_t len) {
  by_offset_.emplace(offset, len);
  by_size_.emplace(len, offset);
  free_bytes_ += len;
}

}  // namespace ferry::xfer::store
