#include "xfer/store/file/spare_files.h"

#include <fcntl.h>
#include <unistd.h>

namespace ferry::xfer::store {

SpareFiles::~SpareFiles() {
  for (const Kept& k : kept_) unlinkat(dir_fd_, k.spare.name.c_str(), 0);
}

void SpareFiles::reader_closed() noexcept {
  if (readers_.fetch_sub(1, std::memory_order_seq_cst) == 1) quiet_epochs_.fetch_add(1, std::memory_order_seq_cst);
}

void SpareFiles::offer(std::string name, std::uint64_t size, std::weak_ptr<const void> in_use) noexcept {
  Kept k{{std::move(name), size}, false, 0, std::move(in_use)};
  if (k.in_use.expired()) {
    // An object file. The epoch first: if the count is zero at any moment
    // after this load, every reader that opened the old file before the swap
    // has closed it. (A pack's readers are not counted: they hold the pack.)
    k.epoch = quiet_epochs_.load(std::memory_order_seq_cst);
    k.readers_at_swap = readers_.load(std::memory_order_seq_cst) > 0;
  }
  {
    std::lock_guard lock(mu_);
    if (kept_.size() < kMaxFiles && kept_bytes_ + size <= kMaxBytes) {
      kept_bytes_ += size;
      kept_.push_back(std::move(k));
      return;
    }
  }
  unlinkat(dir_fd_, k.spare.name.c_str(), 0);
}

std::optional<SpareFiles::Spare> SpareFiles::take(std::uint64_t size) noexcept {
  const std::uint64_t epoch = quiet_epochs_.load(std::memory_order_seq_cst);
  std::lock_guard lock(mu_);
  std::size_t best = kept_.size();
  for (std::size_t i = 0; i < kept_.size(); ++i) {
    const Kept& k = kept_[i];
    if (k.readers_at_swap && epoch <= k.epoch) continue;  // a reader of it may still be open
    if (!k.in_use.expired()) continue;                    // a read still holds the pack
    if (k.spare.size < size || k.spare.size / 2 > size) continue;
    if (best == kept_.size() || k.spare.size < kept_[best].spare.size) best = i;
  }
  if (best == kept_.size()) return std::nullopt;
  Spare out = std::move(kept_[best].spare);
  kept_bytes_ -= out.size;
  kept_[best] = std::move(kept_.back());
  kept_.pop_back();
  reused_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

std::size_t SpareFiles::count() const {
  std::lock_guard lock(mu_);
  return kept_.size();
}

}  // namespace ferry::xfer::store
