#pragma once
// Where the agent's time goes, per phase of the request path, summed over all
// threads (so a phase's total can exceed wall time when lanes run it in
// parallel). Timed per batch or per request, never per block: two steady_clock
// reads per phase and batch are small beside the work of a batch.
// The agent logs the totals on exit (docs/bench/xfer.md reads them), and its
// /metrics reports each phase's durations as a histogram.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <type_traits>

#include "core/prometheus.h"

namespace ferry::xfer::agent {

enum class Phase : int {
  Decode,      // session: decode a transfer frame, check its descriptors, build the job
  Reserve,     // push: reserve pool ranges in the dram tier
  Copy,        // push/pull: the copy (and, by the copy engines' path, the CPU checksum)
  Put,         // push: the chain's put (adopt, index, key map)
  Lookup,      // pull: borrow from the dram tier / read from lower tiers
  Verify,      // pull: compare checksums, account
  Answer,      // encode and send transfer_done
  Stream,      // push/pull: an object streamed between the application and storage (copy, checksum and I/O)
  Queue,       // push/pull: a batch waiting in the mover's queue for a lane
  StreamCopy,  // within Stream: the copies between the application's memory and the agent's pieces
  kCount
};

inline constexpr const char* kPhaseNames[] = {"decode", "reserve", "copy",   "put",   "lookup",
                                              "verify", "answer",  "stream", "queue", "stream_copy"};
static_assert(std::size(kPhaseNames) == static_cast<std::size_t>(Phase::kCount));

class PhaseStats {
 public:
  void add(Phase p, std::chrono::steady_clock::duration d) noexcept {
    ns_[static_cast<int>(p)].fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
    histograms_[static_cast<int>(p)].record(d.count());
  }
  const prom::DurationHistogram& histogram(Phase p) const noexcept {
    return histograms_[static_cast<int>(p)];
  }
  // "decode 12.3 ms, reserve ..." (milliseconds, summed over threads).
  std::string describe() const {
    std::string out;
    for (int i = 0; i < static_cast<int>(Phase::kCount); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %.1f ms", i ? ", " : "", kPhaseNames[i], ns_[i].load() / 1e6);
      out += buf;
    }
    return out;
  }

 private:
  static_assert(std::is_same_v<std::chrono::steady_clock::duration, std::chrono::nanoseconds>);
  std::array<std::atomic<std::uint64_t>, static_cast<int>(Phase::kCount)> ns_{};
  std::array<prom::DurationHistogram, static_cast<int>(Phase::kCount)> histograms_;
};

// Adds the time from construction to destruction (or to stop()) to one phase.
class PhaseTimer {
 public:
  PhaseTimer(PhaseStats& s, Phase p) noexcept : s_(&s), p_(p), t0_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() { stop(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  void stop() noexcept {
    if (s_ == nullptr) return;
    s_->add(p_, std::chrono::steady_clock::now() - t0_);
    s_ = nullptr;
  }

 private:
  PhaseStats* s_;
  Phase p_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace ferry::xfer::agent
