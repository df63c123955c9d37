#include "ferry/core/slot_ring.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace ferry {
namespace {

struct RingMemory {
  explicit RingMemory(std::uint32_t n, std::uint32_t slot, std::uint32_t start = 0)
      : bytes(SlotRing::memsize(n, slot)),
        mem(static_cast<std::uint8_t*>(std::aligned_alloc(64, bytes)), &std::free),
        ring(SlotRing::init(mem.get(), n, slot, start)) {}
  std::size_t bytes;
  std::unique_ptr<std::uint8_t, decltype(&std::free)> mem;
  SlotRing ring;
};

ByteView view(const std::string& s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }
std::string text(ByteView v) { return {reinterpret_cast<const char*>(v.data), v.size}; }

TEST(SlotRing, RejectsBadGeometry) {
  EXPECT_THROW(SlotRing::memsize(3, 64), Error);
  EXPECT_THROW(SlotRing::memsize(0, 64), Error);
  EXPECT_THROW(SlotRing::memsize(8, 10), Error);
  EXPECT_EQ(SlotRing::memsize(8, 64) % 64, 0u);
}

TEST(SlotRing, PushPeekAdvanceRelease) {
  RingMemory m(4, 32);
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  SlotMessage msg;
  EXPECT_FALSE(c.try_peek(&msg));
  ASSERT_EQ(p.try_push(view("hello"), 42), Status::Ok);
  ASSERT_TRUE(c.try_peek(&msg));
  EXPECT_EQ(text(msg.payload), "hello");
  EXPECT_EQ(msg.cookie, 42u);
  c.advance();
  EXPECT_FALSE(c.try_peek(&msg));
  c.release();
  EXPECT_EQ(p.free_slots(), 4u);
}

TEST(SlotRing, FullIsBackPressureUntilRelease) {
  RingMemory m(4, 16);
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(p.try_push(view(std::to_string(i)), i), Status::Ok);
  EXPECT_EQ(p.try_push(view("x"), 9), Status::Full);
  SlotMessage msg;
  ASSERT_TRUE(c.try_peek(&msg));
  c.advance();
  EXPECT_EQ(p.try_push(view("x"), 9), Status::Full) << "a slot is free only once released";
  c.release();
  EXPECT_EQ(p.try_push(view("x"), 9), Status::Ok);
}

TEST(SlotRing, ObserveConsumedFreesSlotsBeforeTheTailSaysSo) {
  RingMemory m(4, 16, 0xfffffffeu);  // wraps while full
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(p.try_push(view("x"), i), Status::Ok);
  SlotMessage msg;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.try_peek(&msg));
    c.advance();  // read, but tail not yet published
  }
  EXPECT_EQ(p.try_push(view("y"), 9), Status::Full);
  p.observe_consumed(0xfffffffeu + 2);
  EXPECT_EQ(p.try_push(view("y"), 9), Status::Ok);
  EXPECT_EQ(p.try_push(view("y"), 9), Status::Ok);
  EXPECT_EQ(p.try_push(view("y"), 9), Status::Full);
  p.observe_consumed(0xfffffffeu + 1);  // stale news never moves the tail back
  EXPECT_EQ(p.try_push(view("y"), 9), Status::Full);
}

TEST(SlotRing, TooLargeIsRefusedWithoutPublishing) {
  RingMemory m(4, 16);
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  EXPECT_EQ(p.try_push(view(std::string(17, 'a')), 1), Status::TooLarge);
  SlotMessage msg;
  EXPECT_FALSE(c.try_peek(&msg));
  EXPECT_EQ(p.try_push(view(std::string(16, 'a')), 1), Status::Ok);
}

TEST(SlotRing, WrapsAroundTheIndexSpace) {
  // Start four messages before 2^32 so the free-running indices wrap mid-test.
  RingMemory m(8, 16, 0xffffffffu - 3);
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(p.try_push(view("m" + std::to_string(i)), i), Status::Ok);
    SlotMessage msg;
    ASSERT_TRUE(c.try_peek(&msg)) << i;
    EXPECT_EQ(text(msg.payload), "m" + std::to_string(i));
    EXPECT_EQ(msg.cookie, static_cast<std::uint64_t>(i));
    c.advance();
    c.release();
    EXPECT_FALSE(c.try_peek(&msg)) << "a stale slot must never look published (" << i << ")";
  }
}

TEST(SlotRing, AttachValidatesTheHeader) {
  RingMemory m(8, 32);
  EXPECT_NO_THROW(SlotRing::attach(m.mem.get(), m.bytes));
  EXPECT_THROW(SlotRing::attach(m.mem.get(), m.bytes - 64), Error) << "region smaller than the ring";
  m.ring.layout()->header.version = 99;
  EXPECT_THROW(SlotRing::attach(m.mem.get(), m.bytes), Error);
  m.ring.layout()->header.version = kRingVersion;
  m.ring.layout()->header.magic = 0;
  EXPECT_THROW(SlotRing::attach(m.mem.get(), m.bytes), Error);
}

}  // namespace
}  // namespace ferry
