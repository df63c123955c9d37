#include "ferry/core/comm_list.h"

#include <bit>
#include <cstring>
#include <string>

#include "ferry/core/status.h"

namespace ferry {
namespace {

constexpr std::uint32_t kMaxPacketsPerItem = 4096;

std::size_t packets_offset(std::uint32_t capacity) { return sizeof(CommListHeader) + sizeof(CommItem) * capacity; }

}  // namespace

std::size_t CommList::memsize(std::uint32_t capacity, std::uint32_t max_packets) {
  if (capacity == 0 || !std::has_single_bit(capacity))
    throw Error("communication list capacity " + std::to_string(capacity) + " is not a power of two");
  if (max_packets == 0 || max_packets > kMaxPacketsPerItem)
    throw Error("communication list items hold 1.." + std::to_string(kMaxPacketsPerItem) + " packets, not " +
                std::to_string(max_packets));
  return packets_offset(capacity) + sizeof(CommPacket) * std::size_t(capacity) * max_packets;
}

CommList CommList::init(void* mem, std::uint32_t capacity, std::uint32_t max_packets) {
  const std::size_t total = memsize(capacity, max_packets);
  if (reinterpret_cast<std::uintptr_t>(mem) % alignof(CommItem) != 0)
    throw Error("communication list memory is not 64-byte aligned");
  std::memset(mem, 0, total);  // every item FREE (0)
  auto* h = static_cast<CommListHeader*>(mem);
  h->magic = kCommListMagic;
  h->version = kCommListVersion;
  h->capacity = capacity;
  h->max_packets = max_packets;
  h->items_offset = sizeof(CommListHeader);
  h->packets_offset = packets_offset(capacity);
  h->total_size = total;
  CommList l;
  l.base_ = static_cast<std::uint8_t*>(mem);
  l.capacity_ = capacity;
  l.max_packets_ = max_packets;
  l.items_offset_ = h->items_offset;
  l.packets_offset_ = h->packets_offset;
  return l;
}

const char* comm_status_name(std::uint32_t status) noexcept {
  switch (status) {
    case kCommFree: return "FREE";
    case kCommReady: return "READY";
    case kCommDone: return "DONE";
    case kCommError: return "ERROR";
    default: return "invalid";
  }
}

}  // namespace ferry
