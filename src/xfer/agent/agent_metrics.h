#pragma once
// What the agent's /metrics (AgentServiceOptions::metrics_port) counts beside
// the mover's totals and phases: transfers, objects and bytes by direction and
// tier, failed descriptors by status, sessions, transfers in flight, and each
// transfer's whole time. The loop thread and the copy threads count (relaxed
// atomics, a few per job, never per block); the endpoint's thread reads.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "core/prometheus.h"
#include "ferry/xfer/types.h"

namespace ferry::xfer::agent {

struct Job;

// Descriptor statuses as label values: the failures, Ok..Internal by value.
inline constexpr std::array<const char*, 11> kFailureKinds = {
    "not_found", "invalid_descriptor", "checksum_mismatch", "no_space", "unavailable", "io_error",
    "too_large", "cancelled",          "protocol_error",    "internal", "other"};
std::size_t failure_index(XferStatus s) noexcept;

class AgentMetrics {
 public:
  static constexpr std::size_t kOps = 2;  // XferOp::Write (push), XferOp::Read (pull)

  // Sizes the per-tier counters; before any session, once.
  void set_tiers(std::size_t tiers);
  std::size_t tiers() const noexcept { return tiers_; }

  // A transfer request decoded (the loop thread).
  void transfer_begun(XferOp op) noexcept;
  // Its answer (a copy thread): each descriptor's outcome and tier; `ns` from
  // the request's arrival.
  void transfer_done(const Job& job, std::int64_t ns) noexcept;
  // Answered with an error because it waited on an application's memory too long.
  void transfer_abandoned(std::size_t descriptors) noexcept;
  // Answered at once with `status` for every descriptor, without running.
  void transfer_refused(XferStatus status, std::size_t descriptors) noexcept;
  void session_opened() noexcept { sessions_.fetch_add(1, std::memory_order_relaxed); }
  void session_closed() noexcept { sessions_.fetch_sub(1, std::memory_order_relaxed); }

  struct Reading {
    std::array<std::uint64_t, kOps> transfers{};
    std::uint64_t in_flight = 0;
    std::uint64_t sessions = 0;
    std::array<std::uint64_t, kFailureKinds.size()> failures{};
  };
  Reading read() const noexcept;
  // Objects and bytes moved with `op` through tier `tier`.
  std::uint64_t objects(XferOp op, std::size_t tier) const noexcept;
  std::uint64_t bytes(XferOp op, std::size_t tier) const noexcept;
  const prom::DurationHistogram& transfer_seconds(XferOp op) const noexcept {
    return totals_[static_cast<std::size_t>(op)];
  }

 private:
  struct TierCounters {
    std::atomic<std::uint64_t> objects{0}, bytes{0};
  };
  std::size_t tiers_ = 0;
  std::unique_ptr<TierCounters[]> by_tier_;  // [op * tiers_ + tier]
  std::array<std::atomic<std::uint64_t>, kOps> transfers_{};
  std::atomic<std::uint64_t> in_flight_{0};
  std::atomic<std::uint64_t> sessions_{0};
  std::array<std::atomic<std::uint64_t>, kFailureKinds.size()> failures_{};
  std::array<prom::DurationHistogram, kOps> totals_;
};

}  // namespace ferry::xfer::agent
