#include "ferry/core/slot_ring.h"

#include <bit>
#include <string>

namespace ferry {
namespace {

constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

std::size_t descs_offset() { return sizeof(RingLayout); }
std::size_t data_offset(std::uint32_t capacity) {
  return align_up(descs_offset() + sizeof(SlotDesc) * capacity, kCacheLine);
}

}  // namespace

std::size_t SlotRing::memsize(std::uint32_t capacity, std::uint32_t slot_size) {
  if (capacity == 0 || !std::has_single_bit(capacity))
    throw Error("ring capacity " + std::to_string(capacity) + " is not a power of two");
  if (slot_size == 0 || slot_size % 16 != 0)
    throw Error("ring slot size " + std::to_string(slot_size) + " is not a positive multiple of 16");
  return align_up(data_offset(capacity) + std::size_t(capacity) * slot_size, kCacheLine);
}

SlotRing::SlotRing(RingLayout* layout)
    : layout_(layout),
      descs_(reinterpret_cast<SlotDesc*>(reinterpret_cast<std::uint8_t*>(layout) +
                                         layout->header.descs_offset)),
      data_(reinterpret_cast<std::uint8_t*>(layout) + layout->header.data_offset) {}

SlotRing SlotRing::init(void* mem, std::uint32_t capacity, std::uint32_t slot_size,
                        std::uint32_t start_index) {
  const std::size_t total = memsize(capacity, slot_size);
  if (reinterpret_cast<std::uintptr_t>(mem) % kCacheLine != 0)
    throw Error("ring memory is not 64-byte aligned");
  std::memset(mem, 0, total);
  auto* layout = static_cast<RingLayout*>(mem);
  RingHeader& h = layout->header;
  h.magic = kRingMagic;
  h.version = kRingVersion;
  h.header_size = sizeof(RingLayout);
  h.features = 0;
  h.capacity = capacity;
  h.slot_size = slot_size;
  h.start_index = start_index;
  h.descs_offset = descs_offset();
  h.data_offset = data_offset(capacity);
  h.total_size = total;
  layout->consumer.tail = start_index;
  SlotRing ring(layout);
  // Each slot's seq must differ from the value its first index will publish, so
  // mark it as published one lap earlier.
  for (std::uint32_t i = 0; i < capacity; ++i) {
    const std::uint32_t k = start_index + i;
    ring.desc(k)->seq = k + 1 - capacity;
  }
  return ring;
}

SlotRing SlotRing::attach(void* mem, std::size_t bytes) {
  if (bytes < sizeof(RingLayout)) throw Error("ring region smaller than its header");
  auto* layout = static_cast<RingLayout*>(mem);
  const RingHeader& h = layout->header;
  if (h.magic != kRingMagic) throw Error("ring magic mismatch (not a Ferry ring)");
  if (h.version != kRingVersion)
    throw Error("ring version " + std::to_string(h.version) + ", this build speaks " +
                std::to_string(kRingVersion));
  if (h.header_size != sizeof(RingLayout)) throw Error("ring header size mismatch");
  if ((h.features & ~kRingKnownFeatures) != 0) throw Error("ring uses feature bits this build does not know");
  if (h.total_size != memsize(h.capacity, h.slot_size) || h.total_size > bytes)
    throw Error("ring size fields are inconsistent or exceed its region");
  if (h.descs_offset != descs_offset() || h.data_offset != data_offset(h.capacity))
    throw Error("ring offsets are inconsistent");
  return SlotRing(layout);
}

}  // namespace ferry
