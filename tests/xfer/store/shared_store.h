#pragma once
// A shared tier for tests of the chain's shared-tier mode (tier_chain.h, "A
// shared tier"): one store that several chains reach, as the agents of several
// hosts reach one Redis Cluster.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store::test {

// One store that both chains reach, as two agents reach one Redis Cluster; it
// can be made to answer Unavailable, as a cluster that is down.
struct SharedStore {
  DramTier inner{64 << 20, "shared"};
  bool down = false;
  std::atomic<int> header_calls{0};  // the chains of several threads call headers()
};

class SharedTier final : public Tier {
 public:
  explicit SharedTier(SharedStore& s) : s_(s) {}
  std::string_view kind() const override { return "redis-cluster"; }
  std::string describe() const override { return "shared"; }
  std::uint64_t capacity() const override { return kUnbounded; }
  std::uint64_t used() const override { return s_.inner.used(); }
  bool shared() const noexcept override { return true; }
  void put(std::span<PutItem> items, Fault& fault) noexcept override {
    if (!s_.down) return s_.inner.put(items, fault);
    for (auto& item : items)
      item.status = fault.raise(XferStatus::Unavailable, "shared store down", item.key);
  }
  void get(std::span<GetItem> items, Fault& fault) noexcept override {
    if (!s_.down) return s_.inner.get(items, fault);
    for (auto& item : items)
      item.status = fault.raise(XferStatus::Unavailable, "shared store down", item.key);
  }
  std::optional<ObjectMeta> stat(std::string_view key) noexcept override {
    return s_.down ? std::nullopt : s_.inner.stat(key);
  }
  XferStatus headers(std::span<const std::string_view> keys, std::span<std::optional<ObjectMeta>> out,
                     Fault& fault) noexcept override {
    ++s_.header_calls;
    if (s_.down) return fault.raise(XferStatus::Unavailable, "shared store down");
    for (std::size_t i = 0; i < keys.size(); ++i) out[i] = s_.inner.stat(keys[i]);
    return XferStatus::Ok;
  }
  XferStatus remove(std::string_view key, Fault& fault) noexcept override {
    if (s_.down) return fault.raise(XferStatus::Unavailable, "shared store down", key);
    return s_.inner.remove(key, fault);
  }
  XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept override {
    if (s_.down) return fault.raise(XferStatus::Unavailable, "shared store down");
    return s_.inner.list(out, fault);
  }
  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override {
    return s_.inner.lru_victims(bytes);
  }

 private:
  SharedStore& s_;
};

// An agent's chain: its own dram tier of `dram` bytes over the shared store.
inline std::unique_ptr<TierChain> agent(SharedStore& store, std::uint64_t dram = 8 << 20) {
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::make_unique<DramTier>(dram));
  tiers.push_back(std::make_unique<SharedTier>(store));
  return std::make_unique<TierChain>(std::move(tiers));
}

}  // namespace ferry::xfer::store::test
