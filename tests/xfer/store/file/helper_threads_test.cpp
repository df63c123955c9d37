#include "xfer/store/file/helper_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace ferry::xfer::store {
namespace {

TEST(HelperThreads, EveryPartRunsOnceAndTheCallerTakesPartZero) {
  HelperThreads helpers(3);
  ASSERT_EQ(helpers.helpers(), 3u);
  for (unsigned parts = 1; parts <= 4; ++parts) {
    for (int round = 0; round < 50; ++round) {
      std::mutex mu;
      std::multiset<unsigned> ran;
      std::set<std::thread::id> threads;
      std::thread::id part_zero;
      ASSERT_TRUE(helpers.try_run(parts, [&](unsigned part) {
        std::lock_guard lock(mu);
        ran.insert(part);
        threads.insert(std::this_thread::get_id());
        if (part == 0) part_zero = std::this_thread::get_id();
      }));
      ASSERT_EQ(ran.size(), parts);
      for (unsigned p = 0; p < parts; ++p) EXPECT_EQ(ran.count(p), 1u) << p;
      EXPECT_EQ(threads.size(), parts) << "each part on a thread of its own";
      EXPECT_EQ(part_zero, std::this_thread::get_id());
    }
  }
}

TEST(HelperThreads, RefusesMorePartsThanThreadsAndNoParts) {
  HelperThreads helpers(1);
  int calls = 0;
  EXPECT_FALSE(helpers.try_run(3, [&](unsigned) { ++calls; }));
  EXPECT_FALSE(helpers.try_run(0, [&](unsigned) { ++calls; }));
  EXPECT_EQ(calls, 0);
  HelperThreads none(0);
  EXPECT_TRUE(none.try_run(1, [&](unsigned) { ++calls; }));
  EXPECT_EQ(calls, 1);
}

// A second caller does its own work rather than wait for the helpers.
TEST(HelperThreads, ASecondCallerIsRefusedWhileTheFirstHoldsThem) {
  HelperThreads helpers(1);
  std::atomic<bool> inside{false}, release{false};
  std::thread first([&] {
    helpers.try_run(2, [&](unsigned part) {
      if (part != 1) return;
      inside = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!inside) std::this_thread::yield();
  int calls = 0;
  EXPECT_FALSE(helpers.try_run(2, [&](unsigned) { ++calls; }));
  EXPECT_EQ(calls, 0);
  release = true;
  first.join();
  EXPECT_TRUE(helpers.try_run(2, [&](unsigned) { ++calls; }));  // free again
}

// Callers hold helpers of their own at once, and a third finds none idle.
TEST(HelperThreads, TwoCallersEachHoldAHelperAtOnce) {
  HelperThreads helpers(2);
  std::atomic<int> inside{0};
  std::atomic<bool> release{false};
  std::set<std::thread::id> lent;
  std::mutex mu;
  const auto caller = [&] {
    EXPECT_TRUE(helpers.try_run(2, [&](unsigned part) {
      if (part != 1) return;
      {
        std::lock_guard lock(mu);
        lent.insert(std::this_thread::get_id());
      }
      ++inside;
      while (!release) std::this_thread::yield();
    }));
  };
  std::thread a(caller), b(caller);
  while (inside < 2) std::this_thread::yield();  // both parts 1 run at the same time
  EXPECT_EQ(helpers.busy(), 2u);
  int calls = 0;
  EXPECT_FALSE(helpers.try_run(2, [&](unsigned) { ++calls; }));
  EXPECT_TRUE(helpers.try_run(1, [&](unsigned) { ++calls; })) << "one part needs no helper";
  EXPECT_EQ(calls, 1);
  release = true;
  a.join();
  b.join();
  EXPECT_EQ(lent.size(), 2u) << "each caller had a helper of its own";
  EXPECT_EQ(helpers.busy(), 0u);
}

TEST(HelperThreads, AHelpersExceptionReachesTheCallerAfterEveryPartIsDone) {
  HelperThreads helpers(2);
  std::atomic<int> finished{0};
  EXPECT_THROW(helpers.try_run(3,
                               [&](unsigned part) {
                                 if (part == 2) throw std::runtime_error("part 2 failed");
                                 std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                 ++finished;
                               }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);
  // The caller's own exception too, and the helpers keep working afterwards.
  EXPECT_THROW(helpers.try_run(2, [&](unsigned part) {
                 if (part == 0) throw std::logic_error("part 0 failed");
               }),
               std::logic_error);
  int calls = 0;
  EXPECT_TRUE(helpers.try_run(1, [&](unsigned) { ++calls; }));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace ferry::xfer::store
