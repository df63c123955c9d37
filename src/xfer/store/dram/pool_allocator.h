#pragma once
// Best-fit allocator of byte ranges inside one pool (the dram tier's mmap region).
// Free ranges are kept twice: by offset, so that a freed range merges with its
// neighbours (coalescing), and by (length, offset), so that allocation takes the
// smallest range that fits (best fit keeps large ranges whole for large objects).
// Every range starts on an `align` boundary and its length is a multiple of it.
//
// Not thread-safe: the dram tier holds its allocator mutex around every call.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace ferry::xfer::store {

class PoolAllocator {
 public:
  // Manages [0, size); size must be a multiple of align (a power of two).
  PoolAllocator(std::uint64_t size, std::uint64_t align);

  // The offset of a free range of round_up(n, align) bytes, or nullopt when no
  // free range is that long (fragmentation included). n must be > 0.
  std::optional<std::uint64_t> allocate(std::uint64_t n);
  // Returns a range from allocate(offset, n) with the same n.
  void free(std::uint64_t offset, std::uint64_t n);

  std::uint64_t rounded(std::uint64_t n) const { return (n + align_ - 1) & ~(align_ - 1); }
  std::uint64_t size() const { return size_; }
  std::uint64_t free_bytes() const { return free_bytes_; }
  std::uint64_t largest_free() const;
  std::size_t free_ranges() const { return by_offset_.size(); }

 private:
  void insert(std::uint64_t offset, std::uint64_t len);

  std::uint64_t size_;
  std::uint64_t align_;
  std::uint64_t free_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> by_offset_;           // offset -> length
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;  // (length, offset)
};

}  // namespace ferry::xfer::store
