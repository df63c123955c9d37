#pragma once
// The mailbox: the memory an application rank and its router share (process
// mode: a POSIX shared-memory object per node; thread mode: heap memory of one
// process). For every application rank of the node it holds a request ring
// (app -> router: chunks of runs to send) and one delivery ring per router
// thread (router thread k -> app: chunks of runs to handle; one producer per
// ring keeps every ring SPSC), all core SlotRings, plus the words of the
// barrier handshake. The layout is an ABI between processes.
//
//   mailbox start (page aligned)
//   +0     MailboxHeader       magic "FRTMAIL1", version, geometry, router pid     (128 B)
//   +128   RouterStatsBlock[8] one per router thread, written by it only (relaxed) (8 x 256 B)
//   +2176  client 0            ClientAppLine     (64 B, written by the app only)
//                              ClientRouterLine  (64 B, written by router thread 0 only)
//                              request ring      SlotRing(ring_slots, ring_slot_bytes)
//                              delivery ring 0 .. delivery_rings-1 (same geometry)
//   +2176 + stride  client 1 ...
//
// Counters and the barrier handshake (ClientAppLine.sent/handled/barrier_request,
// ClientRouterLine.barrier_done) are written with release and read with acquire;
// see client_port.h and router.h for what each pairs with.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/core/slot_ring.h"
#include "ferry/route/stats.h"

namespace ferry::route::detail {

inline constexpr std::uint64_t kMailboxMagic = 0x314c49414d545246ull;  // "FRTMAIL1" little-endian
inline constexpr std::uint32_t kMailboxVersion = 2;
inline constexpr std::uint32_t kMaxRouterThreads = 8;
inline constexpr std::size_t kMailboxStatsOffset = 128;
inline constexpr std::size_t kMailboxClientsOffset = kMailboxStatsOffset + kMaxRouterThreads * 256;  // 2176

enum class RouterState : std::uint32_t { Starting = 0, Running = 1, Stopped = 2, Failed = 3 };
enum class ClientState : std::uint32_t { Empty = 0, Attached = 1, Detached = 2 };

struct MailboxHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_size;  // kMailboxClientsOffset
  std::uint32_t features;     // none defined yet; must be 0
  std::uint32_t num_clients;
  std::uint32_t ring_slots;
  std::uint32_t ring_slot_bytes;
  std::uint64_t client_stride;
  std::uint64_t ring_bytes;  // SlotRing::memsize(ring_slots, ring_slot_bytes)
  std::uint64_t total_size;
  std::uint32_t router_pid;  // 0 in thread mode (same process)
  std::uint32_t router_world_rank;
  std::uint32_t router_state;    // RouterState, written by the router only
  std::uint32_t delivery_rings;  // per client: one per router thread, 1..kMaxRouterThreads
  std::uint64_t reserved[7];
};
static_assert(sizeof(MailboxHeader) == 128);
static_assert(offsetof(MailboxHeader, router_pid) == 56);

// RouterStats as fixed words (the public struct is not an ABI).
struct RouterStatsBlock {
  std::uint64_t word[32];
};
static_assert(sizeof(RouterStatsBlock) == 256);

struct alignas(kCacheLine) ClientAppLine {
  std::uint32_t pid;
  std::uint32_t app_rank;
  std::uint32_t state;            // ClientState
  std::uint32_t barrier_request;  // epoch of the barrier this app waits in
  std::uint64_t sent;             // messages published to the request ring (see client_port.h)
  std::uint64_t handled;          // handlers run, published only when all their sends are published
  std::uint64_t reserved[4];
};
static_assert(sizeof(ClientAppLine) == 64);

struct alignas(kCacheLine) ClientRouterLine {
  std::uint32_t barrier_done;  // the last epoch the router found quiescent
  std::uint32_t reserved0;
  std::uint64_t reserved[7];
};
static_assert(sizeof(ClientRouterLine) == 64);

// Pointers into one client block of a mailbox.
struct ClientSlot {
  ClientAppLine* app = nullptr;
  ClientRouterLine* router = nullptr;
  SlotRing requests;
  std::uint32_t delivery_rings = 1;
  SlotRing deliveries[kMaxRouterThreads];
};

// Owns the memory of one mailbox. Move-only.
class Mailbox {
 public:
  Mailbox() = default;
  ~Mailbox();
  Mailbox(Mailbox&& other) noexcept;
  Mailbox& operator=(Mailbox&& other) noexcept;
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  struct Geometry {
    std::uint32_t clients = 1;
    std::uint32_t ring_slots = 64;
    std::uint32_t ring_slot_bytes = 16384;
    std::uint32_t delivery_rings = 1;  // router threads
  };
  static std::size_t size_for(const Geometry& g);

  // Heap memory, for a router thread in the same process. Throws ferry::Error.
  static Mailbox create_private(const Geometry& g);
  // A POSIX shared-memory object named `name` ("/ferry-route-..."). Throws ferry::Error.
  static Mailbox create_shared(const std::string& name, const Geometry& g);
  // Maps an existing shared mailbox and validates its header; throws
  // ferry::Error saying which field is wrong.
  static Mailbox attach_shared(const std::string& name);
  // Removes the name (the mappings stay); safe to call twice.
  static void unlink(const std::string& name) noexcept;

  MailboxHeader* header() const noexcept { return static_cast<MailboxHeader*>(base_); }
  // Router thread k's statistics.
  RouterStatsBlock* stats_block(std::uint32_t k = 0) const noexcept {
    return reinterpret_cast<RouterStatsBlock*>(static_cast<std::uint8_t*>(base_) + kMailboxStatsOffset) + k;
  }
  std::uint32_t delivery_rings() const noexcept { return header()->delivery_rings; }
  std::uint32_t num_clients() const noexcept { return header()->num_clients; }
  ClientSlot client(std::uint32_t index) const;
  bool valid() const noexcept { return base_ != nullptr; }

 private:
  Mailbox(void* base, std::size_t size, bool shared) : base_(base), size_(size), shared_(shared) {}
  void init(const Geometry& g);
  void reset() noexcept;

  void* base_ = nullptr;
  std::size_t size_ = 0;
  bool shared_ = false;
};

// RouterStats <-> the fixed words of the stats block.
void store_router_stats(RouterStatsBlock* block, const RouterStats& s) noexcept;
RouterStats load_router_stats(const RouterStatsBlock* block) noexcept;
// The sum over a mailbox's router threads (maxima: the largest; world_rank: thread 0's).
RouterStats load_router_stats(const Mailbox& mailbox) noexcept;

}  // namespace ferry::route::detail
