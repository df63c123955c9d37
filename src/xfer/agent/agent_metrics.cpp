#include "xfer/agent/agent_metrics.h"

#include "xfer/agent/mover.h"

namespace ferry::xfer::agent {

std::size_t failure_index(XferStatus s) noexcept {
  const auto v = static_cast<std::int32_t>(s);
  // NotFound is -1 ... Internal is -10 (ferry/xfer/types.h).
  if (v <= -1 && v >= -10) return static_cast<std::size_t>(-v - 1);
  return kFailureKinds.size() - 1;
}

void AgentMetrics::set_tiers(std::size_t tiers) {
  tiers_ = tiers;
  by_tier_ = std::make_unique<TierCounters[]>(kOps * tiers);
}

void AgentMetrics::transfer_begun(XferOp op) noexcept {
  transfers_[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
}

void AgentMetrics::transfer_done(const Job& job, std::int64_t ns) noexcept {
  const auto op = static_cast<std::size_t>(job.op);
  for (std::size_t i = 0; i < job.results.size(); ++i) {
    const DescResult& r = job.results[i];
    if (is_error(r.status)) {
      failures_[failure_index(r.status)].fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const int t = i < job.tiers.size() ? job.tiers[i] : -1;
    if (t < 0 || static_cast<std::size_t>(t) >= tiers_) continue;
    TierCounters& c = by_tier_[op * tiers_ + static_cast<std::size_t>(t)];
    c.objects.fetch_add(1, std::memory_order_relaxed);
    c.bytes.fetch_add(r.size, std::memory_order_relaxed);
  }
  totals_[op].record(ns);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void AgentMetrics::transfer_abandoned(std::size_t descriptors) noexcept {
  failures_[failure_index(XferStatus::IoError)].fetch_add(descriptors, std::memory_order_relaxed);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void AgentMetrics::transfer_refused(XferStatus status, std::size_t descriptors) noexcept {
  failures_[failure_index(status)].fetch_add(descriptors, std::memory_order_relaxed);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

AgentMetrics::Reading AgentMetrics::read() const noexcept {
  Reading r;
  for (std::size_t op = 0; op < kOps; ++op) r.transfers[op] = transfers_[op].load(std::memory_order_relaxed);
  r.in_flight = in_flight_.load(std::memory_order_relaxed);
  r.sessions = sessions_.load(std::memory_order_relaxed);
  for (std::size_t k = 0; k < r.failures.size(); ++k)
    r.failures[k] = failures_[k].load(std::memory_order_relaxed);
  return r;
}

std::uint64_t AgentMetrics::objects(XferOp op, std::size_t tier) const noexcept {
  return by_tier_[static_cast<std::size_t>(op) * tiers_ + tier].objects.load(std::memory_order_relaxed);
}

std::uint64_t AgentMetrics::bytes(XferOp op, std::size_t tier) const noexcept {
  return by_tier_[static_cast<std::size_t>(op) * tiers_ + tier].bytes.load(std::memory_order_relaxed);
}

}  // namespace ferry::xfer::agent
