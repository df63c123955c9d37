#pragma once
// The redis tiers' memory of the keys this process put or got, in order of
// last use, with their sizes: their used() and lru_victims(). Redis is normally
// the last tier, so victims are rarely asked for. Keys the process has not
// touched (stored before a restart, or by another agent) count as older than
// all of these. Not OBJECT IDLETIME: any command on a key (stat's GETRANGE
// included) resets it, and it fails under an LFU maxmemory-policy.
// Thread-safe.

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/xfer/tier.h"
#include "xfer/store/key_map.h"

namespace ferry::xfer::store {

class RecentKeys {
 public:
  void touch(std::string_view key, std::uint64_t size) noexcept;  // put or got: now the most recent
  void forget(std::string_view key) noexcept;                     // removed, or found missing
  std::uint64_t used() const;                                     // bytes of the keys it knows
  // `listed` (what the tier holds, nullopt where it cannot say) first, the keys
  // not touched by this process, then the touched ones, least recently used
  // first, until their sizes add up to `bytes`.
  std::vector<std::string> victims(std::vector<std::pair<std::string, ObjectMeta>> listed,
                                   std::uint64_t bytes) const;

 private:
  struct Tracked {
    std::uint64_t size = 0;
    std::list<std::string>::iterator lru;
  };
  mutable std::mutex mu_;  // guards all below
  KeyMap<Tracked> tracked_;
  std::list<std::string> lru_;  // front = most recently used
  std::uint64_t used_ = 0;
};

}  // namespace ferry::xfer::store
