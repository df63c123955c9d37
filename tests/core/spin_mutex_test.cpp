// SpinMutex under contention: every increment made under it survives (run under
// TSan in CI, which also checks that the lock orders the plain accesses).
#include "core/spin_mutex.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace ferry {
namespace {

TEST(SpinMutex, ExcludesUnderContention) {
  SpinMutex mu;
  std::uint64_t counter = 0;  // plain: only the lock protects it
  std::uint64_t pairs = 0;    // a second word, so a torn section would show
  constexpr int kThreads = 4, kIncrements = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        std::lock_guard lock(mu);
        ++counter;
        pairs += 2;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, std::uint64_t{kThreads} * kIncrements);
  EXPECT_EQ(pairs, 2 * counter);
}

TEST(SpinMutex, TryLockFailsWhileHeld) {
  SpinMutex mu;
  ASSERT_TRUE(mu.try_lock());
  std::thread other([&] { EXPECT_FALSE(mu.try_lock()); });
  other.join();
  mu.unlock();
  EXPECT_TRUE(mu.try_lock());
  mu.unlock();
}

}  // namespace
}  // namespace ferry
