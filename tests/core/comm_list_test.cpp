// The communication list (comm_list.h): its layout, and the three stages of a
// packet path walking it at once, RX -> worker -> TX, with teardown by ERROR.
// CI also runs this under TSan.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/comm_list.h"
#include "ferry/core/detail/backoff.h"
#include "ferry/core/status.h"

namespace ferry {
namespace {

struct ListMemory {
  explicit ListMemory(std::size_t bytes) : mem(static_cast<std::uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {}
  ~ListMemory() { std::free(mem); }
  std::uint8_t* mem;
};

TEST(CommList, RejectsACapacityThatIsNoPowerOfTwoAndEmptyOrHugeItems) {
  EXPECT_THROW(CommList::memsize(0, 32), Error);
  EXPECT_THROW(CommList::memsize(48, 32), Error);
  EXPECT_THROW(CommList::memsize(64, 0), Error);
  EXPECT_THROW(CommList::memsize(64, 4097), Error);
  EXPECT_EQ(CommList::memsize(64, 32), 64 + 64 * 64 + 64 * 32 * 16);
}

TEST(CommList, StartsWithEveryItemFreeAndKeepsItemsApart) {
  const std::size_t bytes = CommList::memsize(8, 4);
  ListMemory m(bytes);
  std::memset(m.mem, 0xab, bytes);
  const CommList l = CommList::init(m.mem, 8, 4);
  const auto* h = reinterpret_cast<const CommListHeader*>(m.mem);
  EXPECT_EQ(h->magic, kCommListMagic);
  EXPECT_EQ(h->total_size, bytes);
  for (std::uint32_t k = 0; k < 8; ++k) {
    EXPECT_EQ(comm_status(l.item(k)), kCommFree);
    EXPECT_EQ(l.item(k).num_packets, 0u);
  }
  // Indices wrap by the capacity; items and packet lists do not overlap.
  EXPECT_EQ(&l.item(9), &l.item(1));
  EXPECT_EQ(l.packets(3) + 4, l.packets(4));
  EXPECT_LE(reinterpret_cast<std::uint8_t*>(&l.item(7) + 1), reinterpret_cast<std::uint8_t*>(l.packets(0)));
  EXPECT_EQ(reinterpret_cast<std::uint8_t*>(l.packets(7) + 4), m.mem + bytes);
}

TEST(CommList, IsTheSameListThroughAnotherMapping) {
  const std::size_t bytes = CommList::memsize(4, 2);
  ListMemory a(bytes), b(bytes);
  const CommList l = CommList::init(a.mem, 4, 2);
  l.item(2).num_packets = 7;
  std::memcpy(b.mem, a.mem, bytes);
  const CommList other = l.at(b.mem);
  EXPECT_EQ(other.base(), b.mem);
  EXPECT_EQ(other.item(2).num_packets, 7u);
  EXPECT_EQ(reinterpret_cast<std::uint8_t*>(other.packets(1)) - b.mem,
            reinterpret_cast<std::uint8_t*>(l.packets(1)) - a.mem);
}

TEST(CommList, NamesGpudevsStates) {
  EXPECT_STREQ(comm_status_name(kCommFree), "FREE");
  EXPECT_STREQ(comm_status_name(kCommReady), "READY");
  EXPECT_STREQ(comm_status_name(kCommDone), "DONE");
  EXPECT_STREQ(comm_status_name(kCommError), "ERROR");
  EXPECT_STREQ(comm_status_name(9), "invalid");
}

std::uint64_t bursts_to_run() {
  const char* env = std::getenv("FERRY_FUZZ_MESSAGES");
  return env != nullptr ? std::strtoull(env, nullptr, 10) / 8 : 20'000;
}

// RX fills each item with a burst whose packets name their sequence number; the
// worker doubles every packet's size in place; TX checks each burst in order and
// frees it. Then teardown marks every item ERROR, which must end a worker that is
// waiting for work.
TEST(CommList, ThreeStagesPassEveryBurstInOrderAndTeardownEndsTheWorker) {
  constexpr std::uint32_t kItems = 16, kMaxPackets = 8;
  ListMemory m(CommList::memsize(kItems, kMaxPackets));
  const CommList l = CommList::init(m.mem, kItems, kMaxPackets);
  const std::uint64_t bursts = bursts_to_run();

  std::thread rx([&] {
    std::uint64_t seq = 0;
    for (std::uint64_t k = 0; k < bursts; ++k) {
      CommItem& item = l.item(static_cast<std::uint32_t>(k));
      Backoff backoff;
      while (comm_status(item) != kCommFree) backoff.idle();
      const std::uint32_t n = 1 + static_cast<std::uint32_t>(k % kMaxPackets);
      for (std::uint32_t i = 0; i < n; ++i) l.packets(static_cast<std::uint32_t>(k))[i] = {seq++, i + 1, 64};
      item.num_packets = n;
      item.ready_ns = k;
      item.sequence = static_cast<std::uint32_t>(k);
      set_comm_status(item, kCommReady);
    }
  });
  std::uint64_t worked = 0;
  std::thread worker([&] {
    for (std::uint64_t k = 0;; ++k) {
      CommItem& item = l.item(static_cast<std::uint32_t>(k));
      Backoff backoff;
      std::uint32_t s;
      while ((s = comm_status(item)) != kCommReady && s != kCommError) backoff.idle();
      if (s == kCommError) return;
      CommPacket* p = l.packets(static_cast<std::uint32_t>(k));
      for (std::uint32_t i = 0; i < item.num_packets; ++i) p[i].size *= 2;
      ++worked;
      set_comm_status(item, kCommDone);
    }
  });
  std::uint64_t expect_seq = 0, bad = 0;
  for (std::uint64_t k = 0; k < bursts; ++k) {
    CommItem& item = l.item(static_cast<std::uint32_t>(k));
    Backoff backoff;
    while (comm_status(item) != kCommDone) backoff.idle();
    if (item.ready_ns != k || item.sequence != static_cast<std::uint32_t>(k) || item.num_packets != 1 + k % kMaxPackets)
      ++bad;
    for (std::uint32_t i = 0; i < item.num_packets; ++i) {
      const CommPacket& p = l.packets(static_cast<std::uint32_t>(k))[i];
      if (p.addr != expect_seq++ || p.size != 2 * (i + 1) || p.room != 64) ++bad;
    }
    set_comm_status(item, kCommFree);
  }
  rx.join();
  for (std::uint32_t k = 0; k < kItems; ++k) set_comm_status(l.item(k), kCommError);
  worker.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(worked, bursts);
}

}  // namespace
}  // namespace ferry
