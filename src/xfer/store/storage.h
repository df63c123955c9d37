#pragma once
// What the agent's data mover needs of storage, and all it may reach: the tier
// chain implements it (tier_chain.h), a unit test can fake it. The zero-copy
// calls reach a tier's Reservable capability (reservable.h) through here, never
// the tier itself.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ferry/xfer/fault.h"
#include "ferry/xfer/tier.h"
#include "xfer/store/reservable.h"
#include "xfer/store/streaming.h"

namespace ferry::xfer::store {

// Reserved ranges on loan: whatever a put did not adopt goes back when the
// lease is released, reused (reserve() releases first) or destroyed. Reusable
// without allocating, as a copy lane reserves a batch at a time.
class Lease {
 public:
  Lease() = default;
  ~Lease() { release(); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // ranges()[i] answers the reserve() call's sizes[i]; an empty range: no room.
  std::span<const Reserved> ranges() const noexcept { return ranges_; }
  // After a put whose items[i] carried ranges()[i]: a range whose item the
  // zero-copy tier stored was adopted (the Reservable contract), so the lease
  // lets go of it without asking the tier. Only the others cost a release.
  void forget_adopted(std::span<const PutItem> items, int zero_copy_tier) noexcept {
    for (std::size_t i = 0; i < items.size() && i < ranges_.size(); ++i)
      if (items[i].status == XferStatus::Ok && items[i].tier == zero_copy_tier &&
          ranges_[i].range.data != nullptr && items[i].data.data == ranges_[i].range.data)
        ranges_[i] = Reserved{};
  }
  void release() noexcept {
    if (owner_ != nullptr && !ranges_.empty()) owner_->release(ranges_);
    ranges_.clear();
    owner_ = nullptr;
  }

 private:
  friend class LeaseFiller;
  Reservable* owner_ = nullptr;
  std::vector<Reserved> ranges_;
};

// For a Storage implementation: fills a lease from a Reservable.
class LeaseFiller {
 public:
  static void fill(Lease& lease, Reservable* owner, std::span<const std::uint64_t> sizes) noexcept {
    lease.release();
    lease.ranges_.assign(sizes.size(), Reserved{});
    if (owner == nullptr) return;
    lease.owner_ = owner;
    owner->reserve(sizes, lease.ranges_);
  }
};

class Storage {
 public:
  virtual ~Storage() = default;
  // As Tier::put and Tier::get (ferry/xfer/tier.h); item.tier says which tier.
  virtual void put(std::span<PutItem> items, Fault& fault) noexcept = 0;
  virtual void get(std::span<GetItem> items, Fault& fault) noexcept = 0;
  // Zero-copy ranges for a batch of objects about to be put: a put whose data
  // is exactly one of them stores it without a copy. Empty ranges throughout
  // where storage offers none.
  virtual void reserve(std::span<const std::uint64_t> sizes, Lease& lease) noexcept = 0;
  // Objects read in place (reservable.h's Borrowed); nullopt where absent or
  // where storage cannot lend them (the caller then get()s them).
  virtual void borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out) noexcept = 0;
  // The index of the tier that lends ranges and borrowed bytes.
  virtual int zero_copy_tier() const noexcept = 0;
  // The memory reserved and borrowed bytes lie in, for the caller to pin for
  // DMA once; empty when there is none.
  virtual std::span<std::byte> dma_memory() const noexcept = 0;

  // Streaming (streaming.h): objects larger than stream_above() may move piece
  // by piece (kUnbounded: none may). put_streamed stores one, as put() would;
  // get_streamed reads one into the sink, as get() would; *tier says which
  // tier. nullopt: not taken that way (the tier that would take or holds it
  // does not stream, or is full): put() or get() it instead.
  virtual std::uint64_t stream_above() const noexcept { return kUnbounded; }
  virtual std::optional<XferStatus> put_streamed(std::string_view /*key*/, std::uint64_t /*size*/,
                                                 const PieceSource& /*source*/, int* /*tier*/,
                                                 Fault& /*fault*/) noexcept {
    return std::nullopt;
  }
  virtual std::optional<XferStatus> get_streamed(std::string_view /*key*/, std::uint64_t /*capacity*/,
                                                 const PieceSink& /*sink*/, std::uint64_t* /*size*/,
                                                 int* /*tier*/, Fault& /*fault*/) noexcept {
    return std::nullopt;
  }
};

}  // namespace ferry::xfer::store
