#pragma once
// Exact-length recycling in front of the best-fit pool allocator.
//
// The agent's pushes overwrite objects of one length over and over: each put
// frees a range, and the next batch reserves ranges of the same length. Best fit
// with coalescing costs two ordered trees' worth of work per allocate and per
// free (perf of the push path: a quarter of its time), all under the dram tier's
// allocator lock, which eight copy lanes share. Here a freed range waits in a
// LIFO list for its length, and an allocation of that length takes one in O(1).
//
// Coalescing is deferred, not lost: when the trees have no range long enough,
// every cached range goes back into them (merging with its neighbours) and the
// allocation is tried again. So allocate() fails only when no free range is long
// enough once every free range is merged. Cached bytes are bounded
// (`max_cached`), which bounds the length of such a flush; a free beyond the
// bound goes straight to the trees.
//
// Not thread-safe, like PoolAllocator: the dram tier holds its lock around calls.

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "xfer/store/dram/pool_allocator.h"

namespace ferry::xfer::store {

class RecyclingAllocator {
 public:
  RecyclingAllocator(std::uint64_t size, std::uint64_t align, std::uint64_t max_cached);

  std::optional<std::uint64_t> allocate(std::uint64_t n);
  void free(std::uint64_t offset, std::uint64_t n);
  // Every cached range back into the trees, merged with its neighbours.
  void flush();

  std::uint64_t rounded(std::uint64_t n) const { return pool_.rounded(n); }
  std::uint64_t size() const { return pool_.size(); }
  std::uint64_t free_bytes() const { return pool_.free_bytes() + cached_bytes_; }
  std::uint64_t cached_bytes() const { return cached_bytes_; }
  // The longest free range without merging cached ones (exact after a flush,
  // which every failed allocate does).
  std::uint64_t largest_free() const;
  // Free ranges in the trees (cached ones not counted).
  std::size_t free_ranges() const { return pool_.free_ranges(); }

 private:
  PoolAllocator pool_;
  std::uint64_t max_cached_;
  std::uint64_t cached_bytes_ = 0;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> cached_;  // rounded length -> offsets
};

}  // namespace ferry::xfer::store
