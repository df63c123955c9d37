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
#include "ferry/xfer/tier.h"
#include "xfer/store/dram/recycling_allocator.h"
#include "xfer/store/key_map.h"
#include "xfer/store/reservable.h"

namespace ferry::xfer::store {

// Pool ranges start on this boundary (O_DIRECT and DMA engines want page-aligned
// buffers); the price is up to 4 KiB of slack per object.
inline constexpr std::uint64_t kDramAlign = 4096;

class DramTier final : public Tier, public Reservable {
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

  void put(std::span<PutItem> items, Fault& fault) noexcept override;
  void get(std::span<GetItem> items, Fault& fault) noexcept override;
  std::optional<ObjectMeta> stat(std::string_view key) noexcept override;
  XferStatus remove(std::string_view key, Fault& fault) noexcept override;  // never fails: Ok or NotFound
  XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept override;
  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override;

  // Zero-copy (reservable.h): the agent's DMA engine fills reserved pool ranges
  // that put() then adopts, and reads stored objects in place.
  Reservable* reservable() noexcept override { return this; }
  void reserve(std::span<const std::uint64_t> sizes, std::span<Reserved> out) noexcept override;
  void release(std::span<const Reserved> ranges) noexcept override;
  void borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out) noexcept override;
  // The whole pool (for cudaHostRegister): stable for the tier's lifetime.
  std::span<std::byte> memory() const noexcept override {
    return {static_cast<std::byte*>(base_), pool_size_};
  }

  // Free pool bytes and the longest free range (fragmentation shows as the gap).
  std::uint64_t free_bytes() const;
  std::uint64_t largest_free() const;

 private:
  struct Block;
  struct Entry {
    std::shared_ptr<const Block> block;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recent)
  };
  struct Reservation {
    std::uint64_t size = 0;
    std::uint64_t ticket = 0;
  };

  bool take_reserved(const PutItem& item) noexcept;
  std::uint64_t offset_of(const std::uint8_t* p) const noexcept;
  void get_one(GetItem& item, Fault& fault) noexcept;
  std::shared_ptr<const Block> make_block(std::uint64_t size, std::uint64_t checksum) noexcept;
  void release_range(std::uint64_t offset, std::uint64_t len) noexcept;
  void release_overwritten(std::vector<std::shared_ptr<const Block>>& old) noexcept;

  std::string spec_;
  std::uint64_t capacity_;
  std::size_t pool_size_ = 0;
  void* base_ = nullptr;

  mutable SpinMutex alloc_mu_;  // guards alloc_, reserved_, next_ticket_; taken after mu_ when both are held
  RecyclingAllocator alloc_;
  std::unordered_map<std::uint64_t, Reservation> reserved_;  // offset -> ranges not yet adopted
  std::uint64_t next_ticket_ = 1;

  mutable SpinMutex mu_;  // guards index_, lru_, used_ (short sections: see spin_mutex.h)
  KeyMap<Entry> index_;
  std::list<std::string> lru_;
  std::uint64_t used_ = 0;
};

}  // namespace ferry::xfer::store
