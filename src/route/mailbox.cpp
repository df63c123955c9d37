#include "route/mailbox.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "ferry/core/status.h"

namespace ferry::route::detail {
namespace {

constexpr std::size_t align_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

// One request ring and `delivery_rings` delivery rings per client.
std::size_t stride_for(std::size_t ring_bytes, std::uint32_t delivery_rings) {
  return align_up(sizeof(ClientAppLine) + sizeof(ClientRouterLine) + (1 + delivery_rings) * ring_bytes, 4096);
}

void check_geometry(const Mailbox::Geometry& g) {
  if (g.clients == 0 || g.clients > 4096)
    throw Error("a mailbox needs 1..4096 clients, got " + std::to_string(g.clients));
  if (g.delivery_rings == 0 || g.delivery_rings > kMaxRouterThreads)
    throw Error("a mailbox needs 1.." + std::to_string(kMaxRouterThreads) +
                " delivery rings (router threads), got " + std::to_string(g.delivery_rings));
}

}  // namespace

std::size_t Mailbox::size_for(const Geometry& g) {
  const std::size_t ring = SlotRing::memsize(g.ring_slots, g.ring_slot_bytes);
  return align_up(kMailboxClientsOffset + std::size_t{g.clients} * stride_for(ring, g.delivery_rings), 4096);
}

void Mailbox::init(const Geometry& g) {
  std::memset(base_, 0, kMailboxClientsOffset);
  MailboxHeader* h = header();
  h->version = kMailboxVersion;
  h->header_size = kMailboxClientsOffset;
  h->num_clients = g.clients;
  h->ring_slots = g.ring_slots;
  h->ring_slot_bytes = g.ring_slot_bytes;
  h->delivery_rings = g.delivery_rings;
  h->ring_bytes = SlotRing::memsize(g.ring_slots, g.ring_slot_bytes);
  h->client_stride = stride_for(h->ring_bytes, g.delivery_rings);
  h->total_size = size_;
  h->router_pid = 0;
  h->router_state = static_cast<std::uint32_t>(RouterState::Starting);
  for (std::uint32_t i = 0; i < g.clients; ++i) {
    auto* block = static_cast<std::uint8_t*>(base_) + kMailboxClientsOffset + i * h->client_stride;
    std::memset(block, 0, sizeof(ClientAppLine) + sizeof(ClientRouterLine));
    std::uint8_t* rings = block + sizeof(ClientAppLine) + sizeof(ClientRouterLine);
    for (std::uint32_t r = 0; r < 1 + g.delivery_rings; ++r)
      SlotRing::init(rings + r * h->ring_bytes, g.ring_slots, g.ring_slot_bytes);
  }
  // Published last: an attacher that sees the magic sees a whole mailbox (the
  // attacher also waits for a barrier after the name arrives, so this is belt and braces).
  std::atomic_ref<std::uint64_t>(h->magic).store(kMailboxMagic, std::memory_order_release);
}

Mailbox Mailbox::create_private(const Geometry& g) {
  check_geometry(g);
  const std::size_t size = size_for(g);
  void* mem = std::aligned_alloc(4096, size);
  if (mem == nullptr) throw Error("cannot allocate a " + std::to_string(size) + "-byte mailbox");
  Mailbox m(mem, size, false);
  m.init(g);
  return m;
}

Mailbox Mailbox::create_shared(const std::string& name, const Geometry& g) {
  check_geometry(g);
  const std::size_t size = size_for(g);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw_errno("shm_open(" + name + ") for the router's mailbox");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    throw_errno("sizing the router's mailbox " + name + " to " + std::to_string(size) + " bytes");
  }
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw_errno("mapping the router's mailbox " + name);
  }
  Mailbox m(mem, size, true);
  m.init(g);
  return m;
}

Mailbox Mailbox::attach_shared(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) throw_errno("shm_open(" + name + "): the router's mailbox");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    throw_errno("fstat of the router's mailbox " + name);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < kMailboxClientsOffset) {
    close(fd);
    throw Error("router mailbox " + name + " is " + std::to_string(size) + " bytes, smaller than its header");
  }
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) throw_errno("mapping the router's mailbox " + name);
  Mailbox m(mem, size, true);
  const MailboxHeader* h = m.header();
  if (std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(h->magic)).load(std::memory_order_acquire) !=
      kMailboxMagic)
    throw Error("router mailbox " + name + ": bad magic (not a mailbox, or not initialised yet)");
  if (h->version != kMailboxVersion)
    throw Error("router mailbox " + name + ": version " + std::to_string(h->version) + ", expected " +
                std::to_string(kMailboxVersion));
  if (h->features != 0) throw Error("router mailbox " + name + ": unknown feature bits");
  if (h->delivery_rings == 0 || h->delivery_rings > kMaxRouterThreads)
    throw Error("router mailbox " + name + ": " + std::to_string(h->delivery_rings) + " delivery rings");
  if (h->total_size != size ||
      size_for(Geometry{h->num_clients, h->ring_slots, h->ring_slot_bytes, h->delivery_rings}) != size)
    throw Error("router mailbox " + name + ": geometry does not match its size " + std::to_string(size));
  for (std::uint32_t i = 0; i < h->num_clients; ++i) {
    ClientSlot c = m.client(i);  // attach() validates each ring header
    (void)c;
  }
  return m;
}

void Mailbox::unlink(const std::string& name) noexcept {
  shm_unlink(name.c_str());
}

ClientSlot Mailbox::client(std::uint32_t index) const {
  const MailboxHeader* h = header();
  if (index >= h->num_clients)
    throw Error("mailbox client " + std::to_string(index) + " out of " + std::to_string(h->num_clients));
  auto* block = static_cast<std::uint8_t*>(base_) + kMailboxClientsOffset + index * h->client_stride;
  ClientSlot c;
  c.app = reinterpret_cast<ClientAppLine*>(block);
  c.router = reinterpret_cast<ClientRouterLine*>(block + sizeof(ClientAppLine));
  std::uint8_t* rings = block + sizeof(ClientAppLine) + sizeof(ClientRouterLine);
  c.requests = SlotRing::attach(rings, h->ring_bytes);
  c.delivery_rings = h->delivery_rings;
  for (std::uint32_t r = 0; r < h->delivery_rings; ++r)
    c.deliveries[r] = SlotRing::attach(rings + (1 + r) * h->ring_bytes, h->ring_bytes);
  return c;
}

void Mailbox::reset() noexcept {
  if (base_ == nullptr) return;
  if (shared_)
    munmap(base_, size_);
  else
    std::free(base_);
  base_ = nullptr;
  size_ = 0;
}

Mailbox::~Mailbox() {
  reset();
}

Mailbox::Mailbox(Mailbox&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      shared_(other.shared_) {}

Mailbox& Mailbox::operator=(Mailbox&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    shared_ = other.shared_;
  }
  return *this;
}

namespace {
// The order of RouterStats fields in the block; append only (ABI).
template <class F>
void each_field(RouterStats& s, F&& f) {
  f(s.clients);
  f(s.chunks_in);
  f(s.chunks_out);
  f(s.frames_routed);
  f(s.pending_max);
  f(s.busy_loops);
  f(s.idle_loops);
  f(s.cpu_ns);
  WireStats& w = s.wire;
  f(w.buffers_sent);
  f(w.bytes_sent);
  f(w.buffers_received);
  f(w.bytes_received);
  f(w.timed_flushes);
  f(w.forced_flushes);
  f(w.frames_forwarded);
  f(w.frames_local);
  f(w.send_slot_waits);
  f(w.max_in_flight);
  f(w.rounds);
  f(w.pool_buffers);
  f(w.capacity_bytes);
  f(s.world_rank);
}
}  // namespace

void store_router_stats(RouterStatsBlock* block, const RouterStats& s) noexcept {
  RouterStats copy = s;
  std::size_t i = 0;
  each_field(copy, [&](std::uint64_t& v) {
    std::atomic_ref<std::uint64_t>(block->word[i++]).store(v, std::memory_order_relaxed);
  });
}

RouterStats load_router_stats(const Mailbox& mailbox) noexcept {
  RouterStats total = load_router_stats(mailbox.stats_block(0));
  for (std::uint32_t k = 1; k < mailbox.delivery_rings(); ++k) {
    RouterStats s = load_router_stats(mailbox.stats_block(k));
    // Levels, not counts: the largest of the threads (clients, world_rank: the same in all).
    const std::uint64_t pending = std::max(total.pending_max, s.pending_max);
    const std::uint64_t in_flight = std::max(total.wire.max_in_flight, s.wire.max_in_flight);
    const std::uint64_t capacity = std::max(total.wire.capacity_bytes, s.wire.capacity_bytes);
    const std::uint64_t clients = total.clients, world_rank = total.world_rank;
    std::vector<std::uint64_t*> a;
    std::vector<std::uint64_t> b;
    each_field(total, [&](std::uint64_t& v) { a.push_back(&v); });
    each_field(s, [&](std::uint64_t& v) { b.push_back(v); });
    for (std::size_t i = 0; i < a.size(); ++i) *a[i] += b[i];
    total.pending_max = pending;
    total.wire.max_in_flight = in_flight;
    total.wire.capacity_bytes = capacity;
    total.clients = clients;
    total.world_rank = world_rank;
  }
  return total;
}

RouterStats load_router_stats(const RouterStatsBlock* block) noexcept {
  RouterStats s;
  std::size_t i = 0;
  each_field(s, [&](std::uint64_t& v) {
    v = std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(block->word[i++]))
            .load(std::memory_order_relaxed);
  });
  return s;
}

}  // namespace ferry::route::detail
