// Pushes three messages through a SlotRing in ordinary memory and reads them
// back: ferry::core, linked from the installed package with nothing else.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/slot_ring.h"

int main() {
  constexpr std::uint32_t kCapacity = 4;
  constexpr std::uint32_t kSlotSize = 64;
  std::size_t bytes = ferry::SlotRing::memsize(kCapacity, kSlotSize);
  void* mem = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  ferry::SlotRing ring = ferry::SlotRing::init(mem, kCapacity, kSlotSize);
  ferry::RingProducer producer(ring);
  ferry::RingConsumer consumer(ring);

  const std::vector<std::string_view> words = {"one", "two", "three"};
  for (std::size_t i = 0; i < words.size(); ++i) {
    ferry::ByteView payload{reinterpret_cast<const std::uint8_t*>(words[i].data()), words[i].size()};
    if (producer.try_push(payload, i) != ferry::Status::Ok) {
      std::fprintf(stderr, "core consumer: push %zu failed\n", i);
      return 1;
    }
  }
  for (std::size_t i = 0; i < words.size(); ++i) {
    ferry::SlotMessage m;
    if (!consumer.try_peek(&m) || m.cookie != i ||
        std::string_view(reinterpret_cast<const char*>(m.payload.data), m.payload.size) != words[i]) {
      std::fprintf(stderr, "core consumer: message %zu is not '%s'\n", i, std::string(words[i]).c_str());
      return 1;
    }
    consumer.advance();
  }
  consumer.release();
  std::free(mem);
  std::printf("core consumer: 3 messages through a SlotRing\n");
  return 0;
}
