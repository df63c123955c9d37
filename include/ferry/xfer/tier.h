#pragma once
// A storage tier of the agent (docs/architecture.md, docs/xfer.md): dram, file or
// redis, each in a folder of its own. Tiers are chained (tier_chain.h): a full
// tier sends its least recently used objects down to the next one. The chain is
// the agent's only door to the tiers.
//
// Contract for every implementation:
// - Thread-safe: the agent's copy threads call put/get/stat/remove concurrently.
// - put replaces an object atomically: a reader sees the old object or the new
//   one, never a mix (the file tier writes a temporary name, then renames).
// - Every object is stored with its checksum (ferry/xfer/checksum.h's, computed by
//   the caller) and get verifies it: a mismatch is ChecksumMismatch, and the
//   bytes are not reported as data.
// - Errors follow ferry/xfer/fault.h: the data path is noexcept; each item gets a
//   status; the text that explains a failure (naming the key and the cause) is
//   raised once into the call's Fault, where it starts. One bad item never fails
//   the others in the batch, and the tier keeps working. NotFound (a miss) and
//   NoSpace (the chain then evicts or moves on) are answers, not faults: they
//   are not raised.
// - Set-up (the constructor) throws ferry::Error.
// - Batches let a tier keep a queue depth (io_uring) or pipeline (Redis).
// - What a tier can do beyond this is declared: reservable() (reservable.h),
//   streamable() (streaming.h).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/bytes.h"
#include "ferry/xfer/fault.h"
#include "ferry/xfer/types.h"

namespace ferry::xfer::store {

inline constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();

struct ObjectMeta {
  std::uint64_t size = 0;
  std::uint64_t checksum = 0;
  // Stored by a build before checksum.h's leaves: checksum is whole_checksum()'s
  // (it differs from checksum() above one leaf). A copy of the object elsewhere
  // must be stored with checksum() instead.
  bool whole_sum = false;
};

struct PutItem {
  std::string_view key;
  ByteView data;
  std::uint64_t checksum = 0;                  // checksum() of data (checksum.h)
  XferStatus status = XferStatus::InProgress;  // set by the tier
  int tier = -1;                               // set by TierChain: the index of the tier that took it
};

struct GetItem {
  std::string_view key;
  MutableByteView out;     // must hold the whole object, else TooLarge
  std::uint64_t size = 0;  // set: the object's size
  XferStatus status = XferStatus::InProgress;
  int tier = -1;  // set by TierChain: the index of the tier it was found in
};

class Reservable;
class Streamable;

class Tier {
 public:
  virtual ~Tier() = default;

  virtual std::string_view kind() const = 0;   // "dram", "file", "redis", "redis-cluster"
  virtual std::string describe() const = 0;    // the spec it was made from, e.g. "dram:8GiB"
  virtual std::uint64_t capacity() const = 0;  // bytes, or kUnbounded
  virtual std::uint64_t used() const = 0;      // bytes of stored objects
  // What the tier can hold at most, for an application's accounting (LMCache's
  // max_capacity_gb): capacity() where that is bounded, else what the medium
  // allows now (the file tier: its bytes plus the disk's free space);
  // kUnbounded where nobody can say (Redis without maxmemory).
  virtual std::uint64_t capacity_now() const { return capacity(); }
  // The longest key the tier can store, in bytes (the agent's whole key, its
  // namespace prefix included).
  virtual std::size_t max_key_length() const noexcept { return SIZE_MAX; }

  // Stores each item; sets item.status to Ok or an error (NoSpace when this
  // tier has no room: the chain then evicts or moves on).
  virtual void put(std::span<PutItem> items, Fault& fault) noexcept = 0;
  // Reads and verifies each item; NotFound for a missing key.
  virtual void get(std::span<GetItem> items, Fault& fault) noexcept = 0;
  // Counts as a use for LRU? No: stat, list and lru_victims never change the LRU order.
  virtual std::optional<ObjectMeta> stat(std::string_view key) noexcept = 0;
  // Removes the key. Ok: it was here and is gone; NotFound: it was not here;
  // any other status (raised): it could not be removed and may still be here,
  // also after a restart (Unavailable: Redis is down; NoSpace: the file tier has
  // no room to record the removal).
  virtual XferStatus remove(std::string_view key, Fault& fault) noexcept = 0;
  // Every object, or a raised error when the tier cannot say what it holds now
  // (Redis down): the caller must then assume it may hold any key.
  virtual XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept = 0;
  // Least recently used keys (put or get counts as a use), oldest first, whose
  // sizes add up to at least `bytes` (or every key, if they add up to less).
  virtual std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept = 0;

  // Whether other agents write this tier too (one Redis shared by hosts). The
  // chain then writes every put through to it, drops rather than moves what
  // the tiers above it evict, and checks each hit above it against headers()
  // (tier_chain.h, "A shared tier").
  virtual bool shared() const noexcept { return false; }
  // out[i]: keys[i]'s meta as the tier holds it now, nullopt where absent; in
  // one round trip where the tier can. Ok, or the status it raised
  // (Unavailable) when it cannot say: out is then meaningless. The default asks
  // stat() per key, which cannot tell an outage from a miss.
  virtual XferStatus headers(std::span<const std::string_view> keys, std::span<std::optional<ObjectMeta>> out,
                             Fault& /*fault*/) noexcept {
    for (std::size_t i = 0; i < keys.size() && i < out.size(); ++i) out[i] = stat(keys[i]);
    return XferStatus::Ok;
  }

  // Bytes a put call should carry for this tier to keep its device busy; 0: no
  // preference. The chain places puts in windows of a few keys (tier_chain.h);
  // for a tier whose queue drains at the end of every call (the file tier) it
  // extends each window until it holds this many bytes.
  virtual std::uint64_t put_window_bytes() const { return 0; }

  // Capabilities: the zero-copy interface, where the tier offers it (the dram
  // tier does). nullptr: it does not.
  virtual Reservable* reservable() noexcept { return nullptr; }
  // Moving large objects piece by piece (streaming.h), where the tier offers it
  // (the file tier does). nullptr: it does not.
  virtual Streamable* streamable() noexcept { return nullptr; }
};

}  // namespace ferry::xfer::store
