#pragma once
// The dram tier: objects in one anonymous mmap region of `capacity` bytes (the
// pool), so that the agent can cudaHostRegister the whole pool once and let the
// GPU DMA straight into it. Pages are touched lazily: an 8 GiB tier costs memory
// only as objects arrive.
//
//   pool (page aligned, capacity rounded up to 4 KiB)
//   +0            object A (4 KiB aligned, length rounded up to 4 KiB)
//   +a            free range ... (best fit, coalesced: pool_allocator.h; ranges of a
//                 recently freed length recycled first: recycling_allocator.h)
//   +b            object B
//
// Concurrency: one short mutex guards the index and the LRU list; the bytes are
// copied outside it, so several threads copy in parallel. Each stored object is a
// reference-counted Block: a get holds a reference while it copies, so a remove or
// an overwrite that runs meanwhile only unlinks the Block from the index, and its
// pool range is freed when the last reader lets go.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/spin_mutex.h"
#include "xfer/store/key_map.h"
#include "xfer/store/dram/recycling_allocator.h"
#include "xfer/store/tier.h"

namespace ferry::xfer::store {

// Pool ranges start on this boundary (O_DIRECT and DMA engines want page-aligned
// buffers); the price is up to 4 KiB of slack per object.
inline constexpr std::uint64_t kDramAlign = 4096;

class DramTier final : public Tier {
 public:
  // Maps the pool; throws ferry::Error when capacity is 0 or mmap fails.
  explicit DramTier(std::uint64_t capacity, std::string spec = "");
  ~DramTier() override;
  DramTier(const DramTier&) = delete;
  DramTier& operator=(const DramTier&) = delete;

  std::string_view kind() const override { return "dram"; }
  std::string describe() const override { return spec_; }
  std::uint64_t capacity() const override { return capacity_; }
  std::uint64_t used() const override;

  void put(std::span<PutItem> items) override;
  void get(std::span<GetItem> items) override;
  std::optional<ObjectMeta> stat(std::string_view key) override;
  XferStatus try_remove(std::string_view key, std::string* error) override;  // never fails: Ok or NotFound
  std::vector<std::pair<std::string, ObjectMeta>> list() override;
  std::vector<std::string> lru_victims(std::uint64_t bytes) override;

  // Zero-copy for the agent's DMA engine. reserve() sets aside a pool range that
  // nobody can see yet; the agent fills it (the GPU DMAs straight into it once
  // pool() is registered) and then put()s an item whose data is exactly that
  // range: the tier adopts the range instead of copying. unreserve() frees a
  // range that was not adopted (the chain stored the object elsewhere, or the
  // copy failed) and does nothing for one that was. nullopt when the pool has no
  // free range of that size (the caller stages instead).
  std::optional<MutableByteView> reserve(std::uint64_t size);
  void unreserve(MutableByteView range) noexcept;
  // A batch's ranges under one lock: out[i] for sizes[i], {nullptr, 0} where
  // there is no room (or sizes[i] is 0); unreserve(ranges) skips those.
  void reserve(std::span<const std::uint64_t> sizes, std::span<MutableByteView> out);
  void unreserve(std::span<const MutableByteView> ranges) noexcept;

  // A stored object's bytes in place, for a zero-copy read: valid while `hold`
  // lives, even if the key is removed or overwritten meanwhile. Counts as a use.
  // The caller verifies `checksum` (this call does not read the bytes).
  struct Borrowed {
    ByteView bytes;
    std::uint64_t checksum = 0;
    std::shared_ptr<const void> hold;
  };
  std::optional<Borrowed> borrow(std::string_view key);
  // A batch's borrows under one lock: out[i] for keys[i], nullopt where absent.
  void borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out);

  // The whole pool (for cudaHostRegister): stable for the tier's lifetime.
  std::span<std::byte> pool() const { return {static_cast<std::byte*>(base_), pool_size_}; }
  // Free pool bytes and the longest free range (fragmentation shows as the gap).
  std::uint64_t free_bytes() const;
  std::uint64_t largest_free() const;

 private:
  struct Block;
  struct Entry {
    std::shared_ptr<const Block> block;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recent)
  };

  bool take_reserved(const PutItem& item) noexcept;
  std::uint64_t offset_of(const std::uint8_t* p) const noexcept;
  void get_one(GetItem& item);
  std::shared_ptr<const Block> make_block(std::uint64_t size, std::uint64_t checksum, std::string* error);
  void release_range(std::uint64_t offset, std::uint64_t len) noexcept;
  void release_overwritten(std::vector<std::shared_ptr<const Block>>& old) noexcept;

  std::string spec_;
  std::uint64_t capacity_;
  std::size_t pool_size_ = 0;
  void* base_ = nullptr;

  mutable SpinMutex alloc_mu_;  // guards alloc_ and reserved_; taken after mu_ when both are held
  RecyclingAllocator alloc_;
  std::unordered_map<std::uint64_t, std::uint64_t> reserved_;  // offset -> size of ranges not yet adopted

  mutable SpinMutex mu_;  // guards index_, lru_, used_ (short sections: see spin_mutex.h)
  KeyMap<Entry> index_;
  std::list<std::string> lru_;
  std::uint64_t used_ = 0;
};

}  // namespace ferry::xfer::store
