#include "ferry/core/arena.h"

#include "ferry/core/slot_check.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <utility>

#include "core/sealed_memfd.h"
#include "ferry/core/wire.h"

namespace ferry {
namespace {

constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

struct Geometry {
  std::uint32_t capacity;
  std::uint32_t slot_size;
  std::size_t ring_bytes;
  std::size_t stride;
};

Geometry geometry(std::uint32_t capacity, std::uint32_t slot_size) {
  const std::size_t ring_bytes = SlotRing::memsize(capacity, slot_size);
  return {capacity, slot_size, ring_bytes, align_up(sizeof(ChannelHeader) + 2 * ring_bytes, 4096)};
}

}  // namespace

std::uint32_t Arena::slot_size_for(std::uint32_t max_message_length) {
  if (max_message_length < wire::kLengthPrefixSize)
    throw Error("ArenaParams::max_message_length " + std::to_string(max_message_length) +
                " leaves no room for the 4-byte length prefix");
  const std::uint32_t payload = max_message_length - wire::kLengthPrefixSize;
  // Room for a check word after every payload short enough to have one
  // (slot_check.h), so that a GPU worker reads a lone request with its poll
  // whatever the arena's message length: 16 bytes more a slot at most, and
  // only in arenas of short messages.
  const std::uint32_t need = payload <= kCheckedPayloadMax ? check_word_offset(payload) + 8 : payload;
  return std::max<std::uint32_t>(16, static_cast<std::uint32_t>(align_up(need, 16)));
}

std::uint32_t Arena::ring_capacity_for(std::uint32_t max_concurrent_messages) {
  if (max_concurrent_messages == 0 || max_concurrent_messages > (1u << 20))
    throw Error("ArenaParams::max_concurrent_messages must be in 1..1048576, got " +
                std::to_string(max_concurrent_messages));
  return std::bit_ceil(max_concurrent_messages);
}

Arena Arena::create(const ArenaParams& params, const std::string& name) {
  if (params.num_channels == 0 || params.num_channels > 1024)
    throw Error("the arena needs 1..1024 channels, got " + std::to_string(params.num_channels));
  if (params.max_message_length > (64u << 20))
    throw Error("ArenaParams::max_message_length " + std::to_string(params.max_message_length) +
                " exceeds the 64 MiB limit");
  const Geometry g = geometry(ring_capacity_for(params.max_concurrent_messages),
                              slot_size_for(params.max_message_length));
  const std::size_t total = kArenaHeaderRegion + g.stride * params.num_channels;

  // Sealed, so that the server can map it knowing it cannot shrink under it.
  const int fd = create_sealed_memfd(name.c_str(), total);
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    ::close(fd);
    throw_errno("mapping the arena");
  }
  Arena arena(fd, base, total);

  auto* h = arena.header();
  h->magic = kArenaMagic;
  h->version = kArenaVersion;
  h->header_size = sizeof(ArenaHeader);
  h->features = 0;
  h->num_channels = params.num_channels;
  h->ring_capacity = g.capacity;
  h->slot_size = g.slot_size;
  h->max_message_length = params.max_message_length;
  h->max_concurrent_messages = params.max_concurrent_messages;
  h->channels_offset = kArenaHeaderRegion;
  h->channel_stride = g.stride;
  h->total_size = total;
  h->creator_pid = static_cast<std::uint32_t>(getpid());
  h->backend = static_cast<std::uint32_t>(params.backend);

  for (std::uint32_t i = 0; i < params.num_channels; ++i) {
    auto* start = static_cast<std::uint8_t*>(base) + kArenaHeaderRegion + g.stride * i;
    auto* ch = reinterpret_cast<ChannelHeader*>(start);
    ch->magic = kChannelMagic;
    ch->index = i;
    ch->requests_offset = kCacheLine;
    ch->responses_offset = kCacheLine + align_up(g.ring_bytes, kCacheLine);
    SlotRing::init(start + ch->requests_offset, g.capacity, g.slot_size);
    SlotRing::init(start + ch->responses_offset, g.capacity, g.slot_size);
  }
  return arena;
}

Arena Arena::attach(int fd) {
  std::size_t size = 0;
  try {
    // Unsealed, its creator could shrink it under our mapping: SIGBUS here.
    size = require_sealed_memfd(fd, "the received arena");
  } catch (const Error&) {
    ::close(fd);
    throw;
  }
  if (size < kArenaHeaderRegion) {
    ::close(fd);
    throw Error("received arena is " + std::to_string(size) + " bytes, smaller than its header");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    ::close(fd);
    throw_errno("mapping the received arena");
  }
  Arena arena(fd, base, size);
  const auto* h = arena.header();
  if (h->magic != kArenaMagic) throw Error("received arena has a bad magic word");
  if (h->version != kArenaVersion)
    throw Error("arena version " + std::to_string(h->version) + ", this build speaks " +
                std::to_string(kArenaVersion));
  if (h->header_size != sizeof(ArenaHeader) || h->features != 0)
    throw Error("arena header size or feature bits not understood by this build");
  if (h->total_size != size || h->channels_offset != kArenaHeaderRegion)
    throw Error("arena size fields disagree with the memfd's size");
  const Geometry g = geometry(h->ring_capacity, h->slot_size);
  if (h->channel_stride != g.stride ||
      h->channels_offset + std::size_t(h->num_channels) * g.stride > size)
    throw Error("arena channel geometry is inconsistent");
  for (std::uint32_t i = 0; i < h->num_channels; ++i) (void)arena.channel(i);  // validates rings
  return arena;
}

Channel Arena::channel(std::uint32_t index) const {
  const auto* h = header();
  if (index >= h->num_channels)
    throw Error("channel " + std::to_string(index) + " out of range (" +
                std::to_string(h->num_channels) + " channels)");
  auto* start = static_cast<std::uint8_t*>(base_) + h->channels_offset + h->channel_stride * index;
  auto* ch = reinterpret_cast<ChannelHeader*>(start);
  if (ch->magic != kChannelMagic || ch->index != index)
    throw Error("channel " + std::to_string(index) + " header is corrupt");
  const std::size_t ring_room = h->channel_stride - ch->requests_offset;
  if (ch->responses_offset >= h->channel_stride)
    throw Error("channel " + std::to_string(index) + " offsets are out of range");
  return {ch, SlotRing::attach(start + ch->requests_offset, ring_room),
          SlotRing::attach(start + ch->responses_offset, h->channel_stride - ch->responses_offset)};
}

void Arena::reset() noexcept {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

Arena::~Arena() { reset(); }

Arena::Arena(Arena&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace ferry
