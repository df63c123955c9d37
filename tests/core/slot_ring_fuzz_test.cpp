// Multi-threaded fuzz test of the slot ring: one producer thread and one
// consumer thread move millions of messages of random sizes through a small
// ring, starting near 2^32 so the indices wrap; every byte is checked. Run under
// TSan in CI (the ring's acquire/release pairs are what TSan verifies).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "ferry/core/slot_ring.h"

namespace ferry {
namespace {

std::uint64_t messages_to_move() {
  if (const char* env = std::getenv("FERRY_FUZZ_MESSAGES")) return std::strtoull(env, nullptr, 10);
  return 2'000'000;
}

// The payload of message i is a pure function of i, so the consumer can check it.
std::uint8_t byte_of(std::uint64_t i, std::size_t j) { return static_cast<std::uint8_t>((i * 131 + j * 7) ^ (i >> 3)); }
std::uint32_t size_of(std::uint64_t i, std::uint32_t slot) {
  return static_cast<std::uint32_t>((i * 2654435761u) % (slot + 1));  // 0..slot
}

void run_fuzz(std::uint32_t capacity, std::uint32_t slot, std::uint32_t start) {
  const std::uint64_t total = messages_to_move();
  const std::size_t bytes = SlotRing::memsize(capacity, slot);
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(64, bytes), &std::free);
  const SlotRing ring = SlotRing::init(mem.get(), capacity, slot, start);

  std::thread producer([&] {
    RingProducer p(ring);
    std::uint8_t buf[1024];
    std::minstd_rand rng(1);
    for (std::uint64_t i = 0; i < total;) {
      const std::uint32_t n = size_of(i, slot);
      for (std::uint32_t j = 0; j < n; ++j) buf[j] = byte_of(i, j);
      if (p.try_push({buf, n}, i) == Status::Ok) {
        ++i;
      } else if (rng() % 4 == 0) {
        std::this_thread::yield();  // vary the interleaving
      }
    }
  });

  RingConsumer c(ring);
  std::minstd_rand rng(2);
  std::uint64_t errors = 0;
  for (std::uint64_t i = 0; i < total;) {
    SlotMessage msg;
    if (!c.try_peek(&msg)) {
      c.release();  // an idle consumer hands every slot back, as workers do
      continue;
    }
    if (msg.cookie != i || msg.payload.size != size_of(i, slot)) {
      ++errors;
    } else {
      for (std::size_t j = 0; j < msg.payload.size; ++j)
        if (msg.payload[j] != byte_of(i, j)) {
          ++errors;
          break;
        }
    }
    c.advance();
    ++i;
    if (rng() % 8 == 0) c.release();  // batch releases at random, as workers do
  }
  c.release();
  producer.join();
  EXPECT_EQ(errors, 0u);
}

// The burst operations (try_push_burst, peek_burst, ready, advance(n)) under
// the same check: random burst sizes on both sides, wrapping indices.
void run_burst_fuzz(std::uint32_t capacity, std::uint32_t slot, std::uint32_t start) {
  const std::uint64_t total = messages_to_move();
  const std::size_t bytes = SlotRing::memsize(capacity, slot);
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(64, bytes), &std::free);
  const SlotRing ring = SlotRing::init(mem.get(), capacity, slot, start);
  constexpr std::uint32_t kMaxBurst = 12;

  std::thread producer([&] {
    RingProducer p(ring);
    std::vector<std::uint8_t> bufs(kMaxBurst * std::size_t(slot));
    ByteView views[kMaxBurst];
    std::uint64_t cookies[kMaxBurst];
    std::minstd_rand rng(3);
    for (std::uint64_t i = 0; i < total;) {
      const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(1 + rng() % kMaxBurst, total - i));
      for (std::uint32_t k = 0; k < n; ++k) {
        std::uint8_t* b = bufs.data() + std::size_t(k) * slot;
        const std::uint32_t size = size_of(i + k, slot);
        for (std::uint32_t j = 0; j < size; ++j) b[j] = byte_of(i + k, j);
        views[k] = {b, size};
        cookies[k] = i + k;
      }
      const std::uint32_t pushed = p.try_push_burst(views, cookies, n);
      i += pushed;
      if (pushed < n && rng() % 4 == 0) std::this_thread::yield();
    }
  });

  RingConsumer c(ring);
  std::minstd_rand rng(4);
  std::uint64_t errors = 0;
  SlotMessage msgs[kMaxBurst];
  for (std::uint64_t i = 0; i < total;) {
    const auto want = static_cast<std::uint32_t>(1 + rng() % kMaxBurst);
    const std::uint32_t got = c.peek_burst(msgs, want);
    if (got == 0) {
      c.release();
      continue;
    }
    if (c.ready(got) != got) ++errors;  // what was published stays published until consumed
    for (std::uint32_t k = 0; k < got; ++k, ++i) {
      const SlotMessage& m = msgs[k];
      if (m.cookie != i || m.payload.size != size_of(i, slot)) {
        ++errors;
        continue;
      }
      for (std::size_t j = 0; j < m.payload.size; ++j)
        if (m.payload[j] != byte_of(i, j)) {
          ++errors;
          break;
        }
    }
    c.advance(got);
    if (rng() % 4 == 0) c.release();
  }
  c.release();
  producer.join();
  EXPECT_EQ(errors, 0u);
}

TEST(SlotRingFuzz, SmallRingRandomSizesWrapping) { run_fuzz(8, 64, 0xffffffffu - 1000); }
TEST(SlotRingFuzz, BurstsOfRandomSizesWrapping) { run_burst_fuzz(16, 64, 0xffffffffu - 5000); }
TEST(SlotRingFuzz, LargerRingLargerMessages) { run_fuzz(256, 1024, 0x7ffffff0u); }

}  // namespace
}  // namespace ferry
