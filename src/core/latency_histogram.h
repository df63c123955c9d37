#pragma once
// A fixed-size latency histogram in nanoseconds, cheap enough to record every
// request of a load generator.
//
// Why log-linear buckets: latencies span five or more orders of magnitude
// (hundreds of ns on a local echo, seconds on a stalled run), and what we report
// are percentiles, where a relative error is what matters. Linear buckets would
// need millions of entries to cover that range at 1 ns; pure power-of-two buckets
// are off by up to 2x. Splitting every power of two into 64 linear sub-buckets
// (HdrHistogram's scheme) bounds the relative error to 1/64 of the value with a
// fixed 18 KiB table, so record() is a bit scan, a shift and an increment: no
// allocation, no branch on the data besides the clamp.
//
//   value v (ns)             bucket index
//   [0, 128)                 v                        exact
//   [2^e, 2^(e+1)), e >= 7   (e-6)*64 + (v >> (e-6)) mantissa in [64, 128)
//   >= 2^41 (~37 min)        clamped into the last bucket (max_ns() stays exact)

#include <array>
#include <cstdint>

namespace ferry {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 6;                      // 64 sub-buckets per power of two
  static constexpr int kMaxExponent = 40;                       // values < 2^41 ns are bucketed
  static constexpr std::uint64_t kSubBuckets = 1ull << kSubBucketBits;
  static constexpr std::size_t kBucketCount =
      (kMaxExponent - kSubBucketBits + 1) * kSubBuckets + kSubBuckets;  // 2304

  LatencyHistogram() noexcept { reset(); }

  void reset() noexcept;

  // Adds one sample. Data path: noexcept, no allocation.
  void record(std::uint64_t ns) noexcept;

  // Adds every sample of `other` (per-thread histograms into one total).
  void merge(const LatencyHistogram& other) noexcept;

  std::uint64_t count() const noexcept { return count_; }
  // Both 0 when the histogram is empty.
  std::uint64_t min_ns() const noexcept { return count_ == 0 ? 0 : min_; }
  std::uint64_t max_ns() const noexcept { return max_; }
  double mean_ns() const noexcept;

  // The value at percentile q (0..100, clamped): the midpoint of the bucket that
  // holds the ceil(q% * count)-th smallest sample, kept within [min_ns, max_ns].
  // Within ~1% of the true sample; 0 when empty.
  std::uint64_t percentile_ns(double q) const noexcept;

  // Bucket arithmetic, exposed for tests.
  static std::size_t bucket_of(std::uint64_t ns) noexcept;
  static std::uint64_t bucket_low(std::size_t index) noexcept;    // smallest value in the bucket
  static std::uint64_t bucket_width(std::size_t index) noexcept;

 private:
  std::array<std::uint64_t, kBucketCount> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;  // 2^64 ns is 584 years of summed latency: no overflow in practice
  std::uint64_t min_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace ferry
