#pragma once
// The arena: one memfd shared by the orchestrator (host role, which creates it and
// may register it for the GPU) and the server (proxy role, which receives its fd
// over the control link). It holds one channel per server data-path thread.
//
//   arena start (page aligned)
//   +0     ArenaHeader      magic "FERRYARN", version, geometry, offsets        (256 B)
//   +4096  channel 0        ChannelHeader (64 B), request ring, response ring
//   +4096 + stride          channel 1 ...
//
// A channel's request ring carries client payloads from the server to a worker;
// its response ring carries results back. Slot i of the response ring answers
// slot i of the request ring, with the same cookie. The server never has more
// requests in a channel than the ring holds, so a worker never finds the
// response ring full and never reads the server's response tail across PCIe.

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/core/slot_ring.h"

namespace ferry {

inline constexpr std::uint64_t kArenaMagic = 0x4e52415952524546ull;  // "FERRYARN" little-endian
inline constexpr std::uint32_t kArenaVersion = 1;
inline constexpr std::uint32_t kChannelMagic = 0x4e484346;  // "FCHN"
inline constexpr std::size_t kArenaHeaderRegion = 4096;

enum class ArenaBackend : std::uint32_t { Cpu = 0, Cuda = 1 };

struct ArenaHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint32_t features;  // none defined yet; must be 0
  std::uint32_t num_channels;
  std::uint32_t ring_capacity;
  std::uint32_t slot_size;
  std::uint32_t max_message_length;
  std::uint32_t max_concurrent_messages;
  std::uint64_t channels_offset;
  std::uint64_t channel_stride;
  std::uint64_t total_size;
  std::uint32_t creator_pid;
  std::uint32_t backend;  // ArenaBackend
  std::uint64_t reserved0[7];
  // Written by the host role only: workers poll it in every bounded spin.
  alignas(kCacheLine) std::uint32_t stop;
  std::uint32_t reserved1[15];
  // Written by workers only: the first error any worker hit (0 = none), sticky.
  alignas(kCacheLine) std::uint32_t worker_error;
  std::uint32_t reserved2[15];
};
static_assert(sizeof(ArenaHeader) == 256);
static_assert(offsetof(ArenaHeader, stop) == 128);
static_assert(offsetof(ArenaHeader, worker_error) == 192);

struct ChannelHeader {
  std::uint32_t magic;
  std::uint32_t index;
  std::uint64_t requests_offset;   // from the channel start
  std::uint64_t responses_offset;  // from the channel start
  std::uint64_t handled;           // written by the worker only: messages answered (progress)
  std::uint64_t reserved[4];
};
static_assert(sizeof(ChannelHeader) == 64);

struct Channel {
  ChannelHeader* header = nullptr;
  SlotRing requests;
  SlotRing responses;
};

struct ArenaParams {
  std::uint32_t num_channels = 1;
  std::uint32_t max_concurrent_messages = 128;  // rounded up to a power of two: ring capacity
  std::uint32_t max_message_length = 256;       // payload slot size is derived from it
  ArenaBackend backend = ArenaBackend::Cpu;
};

// Owns a mapping of an arena (and its fd). Move-only.
class Arena {
 public:
  Arena() = default;
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Creates a new arena in a memfd named `name`. Throws ferry::Error.
  static Arena create(const ArenaParams& params, const std::string& name);
  // Maps an arena received as an fd (takes ownership of fd) and validates its
  // header. The fd must be a memfd sealed against shrinking (create() seals its
  // own); throws ferry::Error saying which seal or field is wrong.
  static Arena attach(int fd);

  // Payload bytes a slot needs for --max-message-length (the 4-byte length
  // prefix counts against that length, so a payload is at most length - 4),
  // with room for a check word after a short one (slot_check.h).
  static std::uint32_t slot_size_for(std::uint32_t max_message_length);
  static std::uint32_t ring_capacity_for(std::uint32_t max_concurrent_messages);

  ArenaHeader* header() const noexcept { return static_cast<ArenaHeader*>(base_); }
  std::uint32_t num_channels() const noexcept { return header()->num_channels; }
  Channel channel(std::uint32_t index) const;
  void* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  int fd() const noexcept { return fd_; }
  bool valid() const noexcept { return base_ != nullptr; }

 private:
  Arena(int fd, void* base, std::size_t size) : fd_(fd), base_(base), size_(size) {}
  void reset() noexcept;

  int fd_ = -1;
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ferry
