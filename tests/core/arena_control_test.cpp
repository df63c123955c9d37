// The arena's control words under concurrency (arena_control.h): the first
// error report wins however many workers race, a stop request reaches every
// worker, and progress counts add up. CI also runs this under TSan.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ferry/core/arena.h"
#include "ferry/core/arena_control.h"

namespace ferry {
namespace {

Arena make_arena(std::uint32_t channels) {
  ArenaParams p;
  p.num_channels = channels;
  p.max_concurrent_messages = 8;
  p.max_message_length = 64;
  return Arena::create(p, "arena-control-test");
}

TEST(ArenaControl, TheFirstErrorReportWinsARace) {
  Arena arena = make_arena(1);
  ArenaHeader& h = *arena.header();
  constexpr int kThreads = 4;
  for (int round = 0; round < 100; ++round) {
    std::atomic_ref<std::uint32_t>(h.worker_error).store(0);
    std::atomic<int> ready{0};
    std::atomic<int> winners{0};
    std::atomic<std::uint32_t> winning_code{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, code = static_cast<std::uint32_t>(t + 1)] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) std::this_thread::yield();  // start together
        if (arena_control::report_error(h, code)) {
          winners.fetch_add(1);
          winning_code.store(code);
        }
        // A later report never replaces the kept one.
        EXPECT_FALSE(arena_control::report_error(h, 1000 + code));
      });
    for (auto& t : threads) t.join();
    ASSERT_EQ(winners.load(), 1) << "round " << round;
    EXPECT_EQ(arena_control::first_error(h), winning_code.load());
  }
}

TEST(ArenaControl, EveryWorkerSeesTheStopRequestAndProgressAddsUp) {
  Arena arena = make_arena(4);
  std::vector<std::thread> workers;
  for (std::uint32_t c = 0; c < arena.num_channels(); ++c)
    workers.emplace_back([&, c] {
      ChannelHeader& ch = *arena.channel(c).header;
      std::uint64_t handled = 0;
      while (!arena_control::stop_requested(*arena.header())) arena_control::publish_handled(ch, ++handled);
      arena_control::publish_handled(ch, handled);
    });
  while (arena_control::total_handled(arena) < 1000) std::this_thread::yield();
  arena_control::request_stop(*arena.header());
  for (auto& w : workers) w.join();
  std::uint64_t sum = 0;
  for (std::uint32_t c = 0; c < arena.num_channels(); ++c) sum += arena_control::handled(*arena.channel(c).header);
  EXPECT_EQ(arena_control::total_handled(arena), sum);
  EXPECT_GE(sum, 1000u);
  arena_control::clear_stop(*arena.header());
  EXPECT_FALSE(arena_control::stop_requested(*arena.header()));
}

}  // namespace
}  // namespace ferry
