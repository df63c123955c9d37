#include "core/log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ferry::log {
namespace {

TEST(LogThrottle, LetsOneThroughPerIntervalAndCountsTheRest) {
  Throttle t(std::chrono::milliseconds(200));
  EXPECT_EQ(t.pass(), 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.pass(), -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(t.pass(), 5);  // the next one says how many were held back
  EXPECT_EQ(t.pass(), -1);
  EXPECT_EQ(suppressed_note(0), "");
  EXPECT_EQ(suppressed_note(1), " (1 similar message suppressed)");
  EXPECT_EQ(suppressed_note(7), " (7 similar messages suppressed)");
}

TEST(LogThrottle, ManyThreadsGetOneLineBetweenThem) {
  Throttle t(std::chrono::seconds(60));
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k)
        if (t.pass() >= 0) passed.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(passed.load(), 1);
}

TEST(LogPrintable, EscapesWhatCouldForgeALineAndCutsLongText) {
  EXPECT_EQ(printable("app-1"), "app-1");
  EXPECT_EQ(printable("a\nb\r\x1b[2J"), "a\\x0ab\\x0d\\x1b[2J");
  EXPECT_EQ(printable(std::string("n\0l", 3)), "n\\x00l");
  EXPECT_EQ(printable("back\\slash"), "back\\x5cslash");  // so that an escape cannot be faked
  EXPECT_EQ(printable("\xff\x80"), "\\xff\\x80");
  EXPECT_EQ(printable(std::string(300, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace ferry::log
