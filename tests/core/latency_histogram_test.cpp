#include "core/latency_histogram.h"

#include <gtest/gtest.h>

#include <random>

namespace ferry {
namespace {

TEST(LatencyHistogram, PercentilesWithinTwoPercent) {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 100000; ++v) h.record(v * 10);  // uniform 10 ns .. 1 ms
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_NEAR(static_cast<double>(h.percentile_ns(50)), 500000.0, 500000.0 * 0.02);
  EXPECT_NEAR(static_cast<double>(h.percentile_ns(99)), 990000.0, 990000.0 * 0.02);
  EXPECT_EQ(h.min_ns(), 10u);
  EXPECT_EQ(h.max_ns(), 1000000u);
  EXPECT_NEAR(h.mean_ns(), 500005.0, 1.0);
}

TEST(LatencyHistogram, MergeAddsCounts) {
  LatencyHistogram a, b;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) a.record(rng() % 1000000);
  for (int i = 0; i < 3000; ++i) b.record(2000000 + rng() % 1000);
  a.merge(b);
  EXPECT_EQ(a.count(), 4000u);
  EXPECT_GE(a.percentile_ns(50), 1900000u) << "three quarters of the samples are near 2 ms";
  EXPECT_LE(a.percentile_ns(10), 1000000u);
}

TEST(LatencyHistogram, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile_ns(50), 0u);
}

}  // namespace
}  // namespace ferry
