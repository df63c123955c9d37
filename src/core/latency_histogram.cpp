#include "core/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace ferry {

static_assert(LatencyHistogram::kBucketCount == 2304, "bucket table size changed");

void LatencyHistogram::reset() noexcept {
  buckets_.fill(0);
  count_ = 0;
  sum_ = 0;
  min_ = std::numeric_limits<std::uint64_t>::max();
  max_ = 0;
}

std::size_t LatencyHistogram::bucket_of(std::uint64_t ns) noexcept {
  // Below 2 * kSubBuckets every value has its own bucket.
  if (ns < 2 * kSubBuckets) return static_cast<std::size_t>(ns);
  const int e = std::bit_width(ns) - 1;  // ns in [2^e, 2^(e+1)), e >= 7
  if (e > kMaxExponent) return kBucketCount - 1;
  const int shift = e - kSubBucketBits;
  const std::uint64_t mantissa = ns >> shift;  // in [64, 128)
  return static_cast<std::size_t>(std::uint64_t(shift) * kSubBuckets + mantissa);
}

std::uint64_t LatencyHistogram::bucket_low(std::size_t index) noexcept {
  if (index < 2 * kSubBuckets) return index;
  // index = shift * 64 + mantissa with mantissa in [64, 128), so index / 64 = shift + 1.
  const std::uint64_t shift = index / kSubBuckets - 1;
  const std::uint64_t mantissa = index - shift * kSubBuckets;
  return mantissa << shift;
}

std::uint64_t LatencyHistogram::bucket_width(std::size_t index) noexcept {
  if (index < 2 * kSubBuckets) return 1;
  return 1ull << (index / kSubBuckets - 1);
}

void LatencyHistogram::record(std::uint64_t ns) noexcept {
  ++buckets_[bucket_of(ns)];
  ++count_;
  sum_ += ns;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (std::size_t i = 0; i < kBucketCount; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double LatencyHistogram::mean_ns() const noexcept {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
}

std::uint64_t LatencyHistogram::percentile_ns(double q) const noexcept {
  if (count_ == 0) return 0;
  if (!(q > 0.0)) return min_;  // also catches NaN
  if (q >= 100.0) return max_;
  // The rank of the sample we want, 1-based: ceil(q% of count), at least 1.
  auto rank = static_cast<std::uint64_t>(std::ceil(q / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      // The bucket's midpoint halves the worst-case error; the exact min and max
      // are better answers than a midpoint outside them.
      const std::uint64_t mid = bucket_low(i) + (bucket_width(i) - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace ferry
