// The CPU packet worker over a communication list, without DPDK: it handles
// READY items in order, in place, and teardown by ERROR ends it promptly.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ferry/packet/packet_worker.h"

namespace ferry::packet {
namespace {

struct Fixture {
  static constexpr std::uint32_t kItems = 8, kBurst = 4, kFrame = 64;
  PacketWorkerOptions options;
  std::unique_ptr<PacketWorker> worker = make_cpu_packet_worker(options, worker::MacSwap{});
  WorkerMemory list_memory = worker->allocate(CommList::memsize(kItems, kBurst), MemoryKind::Host);
  WorkerMemory frames = worker->allocate(kItems * kBurst * kFrame, MemoryKind::Host);
  CommList list = CommList::init(list_memory.host, kItems, kBurst);
  ~Fixture() { worker.reset(); }  // before the memory it works in

  std::uint8_t* frame(std::uint32_t k, std::uint32_t i) const {
    return static_cast<std::uint8_t*>(frames.host) + ((k % kItems) * kBurst + i) * kFrame;
  }
  void fill(std::uint32_t k) {
    CommItem& item = list.item(k);
    for (std::uint32_t i = 0; i < kBurst; ++i) {
      for (std::uint32_t b = 0; b < kFrame; ++b) frame(k, i)[b] = static_cast<std::uint8_t>(k * 7 + i * 3 + b);
      list.packets(k)[i] = {reinterpret_cast<std::uint64_t>(frame(k, i)), kFrame, kFrame};
    }
    item.num_packets = kBurst;
    item.sequence = k;
    set_comm_status(item, kCommReady);
  }
  bool wait_done(std::uint32_t k) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (comm_status(list.item(k)) != kCommDone)
      if (std::chrono::steady_clock::now() > deadline) return false;
    return true;
  }
};

TEST(CpuPacketWorker, SwapsEveryReadyItemInPlaceAndMarksItDone) {
  Fixture f;
  f.worker->start({f.list});
  for (std::uint32_t k = 0; k < 3 * Fixture::kItems; ++k) {
    f.fill(k);
    ASSERT_TRUE(f.wait_done(k)) << "item " << k;
    for (std::uint32_t i = 0; i < Fixture::kBurst; ++i) {
      const std::uint8_t* p = f.frame(k, i);
      for (std::uint32_t b = 0; b < 6; ++b) {
        EXPECT_EQ(p[b], static_cast<std::uint8_t>(k * 7 + i * 3 + b + 6));
        EXPECT_EQ(p[b + 6], static_cast<std::uint8_t>(k * 7 + i * 3 + b));
      }
      EXPECT_EQ(p[12], static_cast<std::uint8_t>(k * 7 + i * 3 + 12));
    }
    set_comm_status(f.list.item(k), kCommFree);  // as TX would
  }
  detail::mark_error({f.list});
  const auto t0 = std::chrono::steady_clock::now();
  f.worker->stop(std::chrono::milliseconds(5000));
  EXPECT_FALSE(f.worker->stuck());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(f.worker->failure(), "");
}

// A worker waiting on an item whose ERROR was overwritten (a burst it finished
// wrote DONE over it) still ends: stop() marks the lists again.
TEST(CpuPacketWorker, StopEndsAWorkerEvenWhenATeardownMarkWasOverwritten) {
  Fixture f;
  f.worker->start({f.list});
  f.fill(0);
  ASSERT_TRUE(f.wait_done(0));
  detail::mark_error({f.list});
  set_comm_status(f.list.item(1), kCommFree);  // the item the worker waits on, overwritten
  f.worker->stop(std::chrono::milliseconds(5000));
  EXPECT_FALSE(f.worker->stuck());
}

TEST(CpuPacketWorker, RefusesDeviceMemory) {
  Fixture f;
  EXPECT_THROW(f.worker->allocate(4096, MemoryKind::Device), Error);
}

}  // namespace
}  // namespace ferry::packet
