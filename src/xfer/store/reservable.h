#pragma once
// A capability a tier may offer (Tier::reservable()): zero-copy placement and
// reads, for a tier whose objects live in memory the GPU can reach (the dram
// tier). The agent reaches it only through the chain (TierChain::reserve,
// TierChain::borrow), which offers it when the top tier does.
//
// Reservation: reserve() sets aside ranges that nobody can see yet; the caller
// fills them (the GPU DMAs straight into them) and put()s items whose data is
// exactly such a range: the tier adopts the range as the object's storage
// instead of copying. release() frees what was not adopted. Each range carries
// a ticket, so that a release never frees a range that was adopted, freed again
// (overwritten, evicted) and reserved by another caller meanwhile.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "ferry/core/bytes.h"

namespace ferry::xfer::store {

struct Reserved {
  MutableByteView range{nullptr, 0};  // {nullptr, 0}: no room (the caller stages instead)
  std::uint64_t ticket = 0;
};

// A stored object's bytes in place: valid while `hold` lives, even if the key is
// removed or overwritten meanwhile. The reader verifies `checksum`.
struct Borrowed {
  ByteView bytes;
  std::uint64_t checksum = 0;
  std::shared_ptr<const void> hold;
};

class Reservable {
 public:
  virtual ~Reservable() = default;
  // out[i] for sizes[i] (a batch under one lock); an empty range where there is
  // no room or sizes[i] is 0.
  virtual void reserve(std::span<const std::uint64_t> sizes, std::span<Reserved> out) noexcept = 0;
  // Frees each range that was not adopted; skips empty ones.
  virtual void release(std::span<const Reserved> ranges) noexcept = 0;
  // out[i] for keys[i] (a batch under one lock), nullopt where absent. Counts as a use.
  virtual void borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out) noexcept = 0;
  // All the memory ranges and borrowed bytes can lie in, stable for the tier's
  // lifetime: the agent pins it once for DMA.
  virtual std::span<std::byte> memory() const noexcept = 0;
};

}  // namespace ferry::xfer::store
