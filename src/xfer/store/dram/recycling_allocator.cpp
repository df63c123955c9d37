#include "xfer/store/dram/recycling_allocator.h"

#include <algorithm>

namespace ferry::xfer::store {

RecyclingAllocator::RecyclingAllocator(std::uint64_t size, std::uint64_t align, std::uint64_t max_cached)
    : pool_(size, align), max_cached_(max_cached) {}

std::optional<std::uint64_t> RecyclingAllocator::allocate(std::uint64_t n) {
  const std::uint64_t len = rounded(n);
  if (auto it = cached_.find(len); it != cached_.end() && !it->second.empty()) {
    const std::uint64_t offset = it->second.back();  // the most recently freed: its lines may be warm
    it->second.pop_back();
    cached_bytes_ -= len;
    return offset;
  }
  if (auto at = pool_.allocate(n)) return at;
  if (cached_bytes_ == 0) return std::nullopt;
  flush();
  return pool_.allocate(n);
}

void RecyclingAllocator::free(std::uint64_t offset, std::uint64_t n) {
  const std::uint64_t len = rounded(n);
  if (cached_bytes_ + len > max_cached_) {
    pool_.free(offset, n);
    return;
  }
  cached_[len].push_back(offset);
  cached_bytes_ += len;
}

void RecyclingAllocator::flush() {
  for (auto& [len, offsets] : cached_) {
    for (const std::uint64_t offset : offsets) pool_.free(offset, len);
    offsets.clear();
  }
  cached_bytes_ = 0;
}

std::uint64_t RecyclingAllocator::largest_free() const {
  std::uint64_t longest = pool_.largest_free();
  for (const auto& [len, offsets] : cached_)
    if (!offsets.empty()) longest = std::max(longest, len);
  return longest;
}

}  // namespace ferry::xfer::store
