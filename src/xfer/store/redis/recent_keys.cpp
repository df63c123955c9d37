#include "xfer/store/redis/recent_keys.h"

namespace ferry::xfer::store {

void RecentKeys::touch(std::string_view key, std::uint64_t size) noexcept {
  std::lock_guard lock(mu_);
  auto it = tracked_.find(key);
  if (it == tracked_.end()) {
    lru_.emplace_front(key);
    tracked_.emplace(std::string(key), Tracked{size, lru_.begin()});
  } else {
    used_ -= it->second.size;
    it->second.size = size;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  used_ += size;
}

void RecentKeys::forget(std::string_view key) noexcept {
  std::lock_guard lock(mu_);
  auto it = tracked_.find(key);
  if (it == tracked_.end()) return;
  used_ -= it->second.size;
  lru_.erase(it->second.lru);
  tracked_.erase(it);
}

std::uint64_t RecentKeys::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

std::vector<std::string> RecentKeys::victims(std::vector<std::pair<std::string, ObjectMeta>> listed,
                                             std::uint64_t bytes) const {
  std::vector<std::string> out;
  std::uint64_t sum = 0;
  std::lock_guard lock(mu_);
  // Keys this process never touched first (older than anything it did touch) ...
  for (auto& [key, meta] : listed) {
    if (sum >= bytes) return out;
    if (tracked_.find(key) != tracked_.end()) continue;
    out.push_back(std::move(key));
    sum += meta.size;
  }
  // ... then the tracked ones, least recently used first.
  for (auto it = lru_.rbegin(); it != lru_.rend() && sum < bytes; ++it) {
    out.push_back(*it);
    sum += tracked_.find(*it)->second.size;
  }
  return out;
}

}  // namespace ferry::xfer::store
