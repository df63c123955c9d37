// DeferredMailbox: every response posted from any thread reaches the owner,
// which sleeps on the eventfd as ServerThread does (read it, then take), and
// the eventfd is written once per batch of mail, not once per response.

#include "offload/deferred_mailbox.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace ferry::offload {
namespace {

class Eventfd {
 public:
  Eventfd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Eventfd() { ::close(fd_); }
  int get() const { return fd_; }
  // The counter, reset to zero; 0 when nothing was written.
  std::uint64_t drain() const {
    std::uint64_t v = 0;
    return ::read(fd_, &v, sizeof v) == sizeof v ? v : 0;
  }

 private:
  int fd_;
};

std::shared_ptr<PendingResponse> pending(const std::shared_ptr<DeferredMailbox>& box, std::uint32_t slot) {
  return std::make_shared<PendingResponse>(box, slot, 1);
}

TEST(DeferredMailbox, ManyPostsBeforeATakeWriteTheEventfdOnce) {
  Eventfd fd;
  auto box = std::make_shared<DeferredMailbox>(fd.get());
  for (std::uint32_t i = 0; i < 100; ++i) pending(box, i)->complete([] { return Framing::Response{}; });
  EXPECT_TRUE(box->has_mail());
  EXPECT_EQ(fd.drain(), 1u);
  EXPECT_EQ(box->take().size(), 100u);
  EXPECT_FALSE(box->has_mail());
  // Empty again: the next post announces itself.
  pending(box, 0)->complete([] { return Framing::Response{}; });
  EXPECT_EQ(fd.drain(), 1u);
  EXPECT_EQ(box->take().size(), 1u);
}

TEST(DeferredMailbox, AnOwnerSleepingOnTheEventfdMissesNothing) {
  Eventfd fd;
  auto box = std::make_shared<DeferredMailbox>(fd.get());
  constexpr int kProducers = 4;
  constexpr std::uint32_t kEach = 50'000;
  std::atomic<int> started{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      started.fetch_add(1);
      for (std::uint32_t i = 0; i < kEach; ++i) {
        pending(box, p * kEach + i)->complete([] { return Framing::Response{}; });
        if (i % 1024 == 0) std::this_thread::yield();  // let the owner fall asleep now and then
      }
    });
  std::vector<bool> seen(kProducers * kEach, false);
  std::size_t received = 0;
  std::size_t wakes = 0;
  std::uint64_t writes = 0;  // what the eventfd counted: one per write
  while (received < seen.size()) {
    pollfd p{fd.get(), POLLIN, 0};
    // A lost wake-up leaves the owner asleep with mail waiting.
    const int ready = ::poll(&p, 1, 5000);
    ASSERT_EQ(ready, 1) << "the owner slept 5 s with " << seen.size() - received
                        << " responses not taken (has_mail " << box->has_mail() << ")";
    writes += fd.drain();
    ++wakes;
    for (const DeferredMailbox::Done& d : box->take()) {
      ASSERT_FALSE(seen[d.pending->slot()]) << "slot " << d.pending->slot() << " taken twice";
      seen[d.pending->slot()] = true;
      ++received;
    }
  }
  for (std::thread& t : producers) t.join();
  EXPECT_FALSE(box->has_mail());
  writes += fd.drain();
  std::printf("%zu responses in %zu wake-ups, %llu eventfd writes\n", received, wakes,
              static_cast<unsigned long long>(writes));
  // A write only when the mailbox was empty: at most one per take, and the
  // one that announced mail left for after the last take.
  EXPECT_LE(writes, wakes + 1);
}

TEST(DeferredMailbox, AClosedMailboxDropsPostsAndLeavesTheFdAlone) {
  Eventfd fd;
  auto box = std::make_shared<DeferredMailbox>(fd.get());
  box->close();
  pending(box, 0)->complete([] { return Framing::Response{}; });
  EXPECT_EQ(fd.drain(), 0u);
  EXPECT_TRUE(box->take().empty());
}

}  // namespace
}  // namespace ferry::offload
