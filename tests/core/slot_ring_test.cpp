#include "ferry/core/slot_ring.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
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
  m.ring.ask_for_check_words();
  EXPECT_NO_THROW(SlotRing::attach(m.mem.get(), m.bytes)) << "a known feature bit";
  m.ring.layout()->header.features |= 1u << 31;
  EXPECT_THROW(SlotRing::attach(m.mem.get(), m.bytes), Error) << "an unknown feature bit";
  m.ring.layout()->header.features = 0;
  m.ring.layout()->header.magic = 0;
  EXPECT_THROW(SlotRing::attach(m.mem.get(), m.bytes), Error);
}

// The word after the payload of the slot `index` was published into.
std::uint64_t word_after(const SlotRing& ring, std::uint32_t index, std::uint32_t len) {
  std::uint64_t w = 0;
  std::memcpy(&w, ring.data(index) + check_word_offset(len), sizeof w);
  return w;
}

TEST(SlotRingCheckWords, WrittenOnlyWhenTheConsumerAsks) {
  RingMemory m(4, 64);
  RingProducer p(m.ring);
  std::memset(m.ring.data(0), 0xAB, 64);
  RingConsumer c(m.ring);
  ASSERT_EQ(p.try_push(view("twelve bytes"), 7), Status::Ok);
  EXPECT_EQ(word_after(m.ring, 0, 12), 0xABABABABABABABABull) << "no word unless asked";
  SlotMessage msg;
  ASSERT_TRUE(c.try_peek(&msg));
  c.advance();
  c.release();
  p.observe_consumed(c.next_index());
  m.ring.ask_for_check_words();
  EXPECT_TRUE(m.ring.check_words_asked());
  ASSERT_EQ(p.try_push(view("twelve bytes"), 7), Status::Ok);
  EXPECT_EQ(word_after(m.ring, 1, 12), compute_check_word(m.ring.data(1), 12, 2, 7));
}

TEST(SlotRingCheckWords, TheWordVouchesForSeqLenCookieAndEveryByte) {
  RingMemory m(4, 128, 0xfffffffeu);  // wraps: seq 0xffffffff, then 0
  m.ring.ask_for_check_words();
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  SlotMessage msg;
  std::string payload(kCheckedPayloadMax, 'x');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 37 + 11);
  for (std::uint32_t len : {0u, 1u, 7u, 8u, 9u, 64u, kCheckedPayloadMax}) {
    const std::uint32_t k = p.head();
    ASSERT_EQ(p.try_push(view(payload.substr(0, len)), 1000 + len), Status::Ok);
    std::uint8_t* slot = m.ring.data(k);
    const std::uint64_t stored = word_after(m.ring, k, len);
    EXPECT_EQ(stored, compute_check_word(slot, len, k + 1, 1000 + len)) << len;
    // What a consumer that read too early, or a mix of two messages, would see.
    EXPECT_NE(stored, compute_check_word(slot, len, k + 1 - 4, 1000 + len)) << "the slot's message a lap ago";
    EXPECT_NE(stored, compute_check_word(slot, len, k + 1, 999 + len)) << "another cookie";
    if (len > 0) {
      EXPECT_NE(stored, compute_check_word(slot, len - 1, k + 1, 1000 + len)) << "another length";
      for (std::uint32_t b = 0; b < len; ++b) {
        slot[b] ^= 0x10;
        EXPECT_NE(stored, compute_check_word(slot, len, k + 1, 1000 + len)) << "byte " << b << " of " << len;
        slot[b] ^= 0x10;
      }
    }
    // Bytes past the payload do not count.
    if (len % 8 != 0) {
      slot[len] ^= 0xff;
      EXPECT_EQ(stored, compute_check_word(slot, len, k + 1, 1000 + len));
      slot[len] ^= 0xff;
    }
    ASSERT_TRUE(c.try_peek(&msg));
    EXPECT_EQ(text(msg.payload), payload.substr(0, len));
    c.advance();
    c.release();
    p.observe_consumed(c.next_index());
  }
}

TEST(SlotRingCheckWords, OnlyForARequestBehindNoOther) {
  RingMemory m(8, 64);
  m.ring.ask_for_check_words();
  RingProducer p(m.ring);
  RingConsumer c(m.ring);
  ASSERT_EQ(p.try_push(view("first"), 1), Status::Ok);
  std::memset(m.ring.data(1), 0xAB, 64);
  ASSERT_EQ(p.try_push(view("second"), 2), Status::Ok);
  EXPECT_EQ(word_after(m.ring, 0, 5), compute_check_word(m.ring.data(0), 5, 1, 1)) << "the ring was empty";
  EXPECT_EQ(word_after(m.ring, 1, 6), 0xABABABABABABABABull) << "behind one not yet consumed: no word";
  SlotMessage msg;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.try_peek(&msg));
    c.advance();
  }
  c.release();
  p.observe_consumed(c.next_index());  // as the server learns it from the responses
  ASSERT_EQ(p.try_push(view("third"), 3), Status::Ok);
  EXPECT_EQ(word_after(m.ring, 2, 5), compute_check_word(m.ring.data(2), 5, 3, 3)) << "empty again";
}

TEST(SlotRingCheckWords, NoneWhereThePayloadLeavesNoRoomOrIsLong) {
  EXPECT_TRUE(has_check_word(56, 64));
  EXPECT_FALSE(has_check_word(57, 64)) << "the word would end past the slot";
  EXPECT_TRUE(has_check_word(kCheckedPayloadMax, 4096));
  EXPECT_FALSE(has_check_word(kCheckedPayloadMax + 1, 4096)) << "past what a warp reads at once";
  RingMemory m(2, 64);
  m.ring.ask_for_check_words();
  RingProducer p(m.ring);
  const std::string full(64, 'f');
  ASSERT_EQ(p.try_push(view(full), 1), Status::Ok);
  EXPECT_EQ(text({m.ring.data(0), 64}), full) << "nothing written past a full slot";
}

}  // namespace
}  // namespace ferry
