#pragma once
// A random walk of allocations and frees for the pool allocators' tests: after
// every step, no two live ranges overlap and free + live bytes equal the pool.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <random>

namespace ferry::xfer::store::test {

// `length(rng)` gives each allocation's size; `check()` runs after every step.
// Returns the ranges still live (offset -> size) for the caller to free.
template <class Allocator>
std::map<std::uint64_t, std::uint64_t> random_walk(Allocator& a, std::mt19937& rng, int steps,
                                                   const std::function<std::uint64_t(std::mt19937&)>& length,
                                                   const std::function<void()>& check = [] {}) {
  std::map<std::uint64_t, std::uint64_t> live;  // offset -> n
  for (int step = 0; step < steps; ++step) {
    if (live.empty() || rng() % 2 == 0) {
      const std::uint64_t n = length(rng);
      if (auto at = a.allocate(n)) {
        auto next = live.lower_bound(*at);
        if (next != live.end()) {
          EXPECT_GE(next->first, *at + a.rounded(n)) << "overlap";
        }
        if (next != live.begin()) {
          auto prev = std::prev(next);
          EXPECT_LE(prev->first + a.rounded(prev->second), *at) << "overlap";
        }
        live[*at] = n;
      }
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a.free(it->first, it->second);
      live.erase(it);
    }
    std::uint64_t used = 0;
    for (const auto& [o, n] : live) used += a.rounded(n);
    EXPECT_EQ(a.free_bytes() + used, a.size());
    check();
    if (::testing::Test::HasFailure()) break;  // one report, not thousands
  }
  return live;
}

}  // namespace ferry::xfer::store::test
