// The tier chain's shared-tier mode (tier_chain.h, "A shared tier"): what keeps
// the tiers above a tier that other agents write coherent with it.

#include "core/log.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/tier_chain.h"
#include "xfer/store/tier_chain_job.h"

namespace ferry::xfer::store {
namespace {

bool same_version(const ObjectMeta& a, const ObjectMeta& b) {
  return a.size == b.size && a.checksum == b.checksum;
}

}  // namespace

std::vector<TierChain::Job*> TierChain::write_through(std::size_t level, std::vector<Job*> jobs, Op& op) {
  if (jobs.empty()) return jobs;
  Tier& shared = *tiers_[shared_];
  std::vector<PutItem> batch(jobs.size());
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    batch[k].key = jobs[k]->key;
    batch[k].data = jobs[k]->data;
    batch[k].checksum = jobs[k]->checksum;
  }
  shared.put(batch, op.fault);  // raises its failures, NoSpace aside
  std::vector<Job*> both;
  const std::uint32_t bit = 1u << level;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    Job& j = *jobs[k];
    if (batch[k].status == XferStatus::Ok) {
      both.push_back(&j);
      continue;
    }
    // The shared tier keeps the version it had: the new one must not stay
    // above it, where this agent alone would serve it.
    Fault why;
    const XferStatus s = tiers_[level]->remove(j.key, why);
    const std::uint32_t mask = where(j.key);
    if (s == XferStatus::Ok || s == XferStatus::NotFound) {
      set_where(j.key, mask & ~bit);
    } else {
      set_where(j.key, mask | bit);
      log::app().error("tier chain: cannot take the unacknowledged new version of {} out of {} again: {}",
                       quote_key(j.key), tiers_[level]->describe(), why.detail());
    }
    j.failed = true;
    j.hard = op.fault.raise(batch[k].status,
                            "cannot store " + quote_key(j.key) + " (" + format_size(j.data.size) +
                                "): the shared tier " + shared.describe() + " did not take it (" +
                                std::string(to_string(batch[k].status)) +
                                "), and a copy in the tiers above it alone is invisible to the other agents",
                            j.key);
  }
  return both;
}

void TierChain::validate(std::size_t level, std::span<const std::string_view> keys,
                         std::span<const ObjectMeta> local, std::vector<std::size_t>* current,
                         std::vector<std::size_t>* stale) noexcept {
  if (keys.empty()) return;
  Tier& shared = *tiers_[shared_];
  std::vector<std::optional<ObjectMeta>> remote(keys.size());
  Fault why;
  if (const XferStatus s = shared.headers(keys, remote, why); s != XferStatus::Ok) {
    // The local copies stay: they may well be current, and the next read asks again.
    log::app().warn(
        "tier chain: {} hit(s) in {} (the first {}) served as misses: the shared tier {} cannot say whether "
        "they are current ({}: {})",
        keys.size(), tiers_[level]->describe(), quote_key(keys[0]), shared.describe(), to_string(s),
        why.detail());
    return;
  }
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (remote[k] && same_version(*remote[k], local[k])) {
      current->push_back(k);
      continue;
    }
    drop_stale(level, keys[k], local[k]);
    if (remote[k]) stale->push_back(k);
  }
}

std::vector<bool> TierChain::check_hits(std::size_t level, std::span<GetItem> batch,
                                        std::span<const std::optional<ObjectMeta>> local) noexcept {
  std::vector<bool> missed(batch.size(), false);
  std::vector<std::string_view> keys;
  std::vector<ObjectMeta> metas;
  std::vector<std::size_t> at;
  for (std::size_t k = 0; k < batch.size(); ++k) {
    if (batch[k].status == XferStatus::NotFound) continue;
    if (!local[k]) {
      batch[k].status = XferStatus::NotFound;  // put here since its version was read: read on down
      continue;
    }
    // A hit, or a copy that failed here (its checksum): either way the shared
    // tier says which version counts.
    keys.push_back(batch[k].key);
    metas.push_back(*local[k]);
    at.push_back(k);
  }
  std::vector<std::size_t> current, stale;
  validate(level, keys, metas, &current, &stale);
  std::vector<bool> settled(at.size(), false);
  for (const std::size_t c : current) settled[c] = true;
  for (const std::size_t c : stale) {
    settled[c] = true;
    batch[at[c]].status = XferStatus::NotFound;
  }
  for (std::size_t c = 0; c < at.size(); ++c)
    if (!settled[c]) missed[at[c]] = true;
  return missed;
}

void TierChain::drop_stale(std::size_t level, std::string_view key, const ObjectMeta& seen) noexcept {
  Stripe& stripe = stripes_[stripe_of(key)];
  std::lock_guard lock(stripe.mu);
  // A put of this agent may have replaced it since: that version is written
  // through, so it stays.
  const std::optional<ObjectMeta> now = tiers_[level]->stat(key);
  if (!now || !same_version(*now, seen)) return;
  Fault why;
  const XferStatus s = tiers_[level]->remove(key, why);
  if (s == XferStatus::Ok || s == XferStatus::NotFound) {
    set_where(key, where(key) & ~(1u << level));
    dropped_stale_.fetch_add(1, std::memory_order_relaxed);
  } else {
    // It stays, and every hit on it is checked again.
    log::app().warn("tier chain: cannot drop the stale copy of {} in {}: {}", quote_key(key),
                    tiers_[level]->describe(), why.detail());
  }
}

bool TierChain::drop_not_move(std::size_t level, std::string_view key) {
  return shared_ > static_cast<int>(level) && (where(key) & (1u << shared_)) != 0;
}

}  // namespace ferry::xfer::store
