#include "route/router.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "ferry/core/status.h"
#include "route/fatal.h"
#include "route/idle.h"
#include "route/run.h"

namespace ferry::route::detail {

std::uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

namespace {
constexpr int kSlotsPerClientPass = 16;  // request chunks taken from one app per pass (fairness)
constexpr int kBuffersPerPass = 64;      // received MPI buffers routed per pass
constexpr std::uint64_t kCheckEveryNs = 100'000'000ull;
}  // namespace

Router::Router(RouterConfig config, BufferPool* pool, WireStats* wire)
    : cfg_(std::move(config)),
      pool_(pool),
      wire_(wire),
      slot_bytes_(cfg_.mailbox->header()->ring_slot_bytes),
      flush_ns_(std::uint64_t{cfg_.options.flush_us} * 1000ull) {
  const std::uint32_t n = cfg_.mailbox->num_clients();
  if (cfg_.shards == 0 || cfg_.shard >= cfg_.shards || cfg_.shards > cfg_.mailbox->delivery_rings())
    throw Error("router shard " + std::to_string(cfg_.shard) + " of " + std::to_string(cfg_.shards) +
                " over a mailbox with " + std::to_string(cfg_.mailbox->delivery_rings()) + " delivery rings");
  for (std::uint32_t i = 0; i < n; ++i) {
    clients_.push_back(cfg_.mailbox->client(i));
    requests_.emplace_back(clients_.back().requests);
    deliveries_.push_back(Delivery{RingProducer(clients_.back().deliveries[cfg_.shard]), nullptr, 0, {}, {}});
    if (i % cfg_.shards == cfg_.shard) own_.push_back(static_cast<int>(i));
  }
  stats_.clients = n;
}

// Delivers run h's `count` payloads to one app: into the open chunk, joining
// its last run when the key matches, then into fresh slots; what the app's
// ring has no room for waits in router memory. Runs wait while older ones for
// the same app do (per-destination order).
void Router::deliver(Delivery& d, const RunHeader& h, const std::uint8_t* payloads, std::uint32_t count) {
  if (run_bytes(h.len(), 1) > slot_bytes_) [[unlikely]]  // an empty slot would never take it
    too_large_for_slot(h.len());
  while (count != 0) {
    if (!d.waiting.empty()) {
      wait_for_room(d, h, payloads, count);
      return;
    }
    if (d.data != nullptr) {
      const std::uint32_t n = d.run.append_payloads(d.data, &d.used, slot_bytes_, h, payloads, count);
      payloads += std::size_t{n} * h.len();
      count -= n;
      if (count == 0) return;
      publish_delivery(d);  // full: the chunk leaves
    }
    MutableByteView slot = d.producer.try_claim();
    if (slot.data == nullptr) {  // the app is behind
      wait_for_room(d, h, payloads, count);
      return;
    }
    d.data = slot.data;
    d.used = 0;
    d.run.reset();
  }
}

// Appends a waiting run (at most a slot) to the open chunk, or publishes it
// and claims the next slot; false (and no chunk open) when the ring is full.
bool Router::try_deliver(Delivery& d, const std::uint8_t* run, std::uint32_t bytes) {
  if (d.data == nullptr || d.used + bytes > slot_bytes_) {
    publish_delivery(d);  // the run does not fit: the chunk leaves
    MutableByteView slot = d.producer.try_claim();
    if (slot.data == nullptr) return false;  // the app is behind
    d.data = slot.data;
    d.used = 0;
  }
  copy_words(d.data + d.used, run, bytes);
  d.used += bytes;
  d.run.reset();  // the chunk's last run is one the cursor does not know
  return true;
}

// Keeps payloads for an app whose ring is full, as runs of at most a slot (so
// each later fits a slot whole), in pool buffers queued per app.
void Router::wait_for_room(Delivery& d, const RunHeader& h, const std::uint8_t* payloads,
                           std::uint32_t count) {
  const std::uint32_t per_run = items_that_fit(h.len(), slot_bytes_);
  if (per_run == 0) [[unlikely]]
    too_large_for_slot(h.len());
  if (d.waiting.empty()) ++clients_waiting_;
  while (count != 0) {
    const std::uint32_t k = std::min(per_run, count);
    const auto bytes = static_cast<std::uint32_t>(run_bytes(h.len(), k));
    if (d.waiting.empty() || d.waiting.back().tail + bytes > pool_->buffer_bytes()) {
      d.waiting.push_back({pool_->get(), 0, 0});  // a slot fits a buffer: validate() checks slot <= buffer
      if (++waiting_buffers_ > stats_.pending_max) stats_.pending_max = waiting_buffers_;
    }
    Waiting& w = d.waiting.back();
    w.tail += put_run(w.buf + w.tail, h, payloads, k);
    payloads += std::size_t{k} * h.len();
    count -= k;
  }
}

// Moves one app's waiting runs into its ring, oldest first, while it has
// room; true when it moved any.
bool Router::drain_waiting(Delivery& d) {
  bool did = false;
  while (!d.waiting.empty()) {
    Waiting& w = d.waiting.front();
    while (w.head < w.tail) {
      RunHeader h;
      const std::uint32_t rb = read_run(w.buf, w.tail, w.head, &h);
      if (rb == 0) [[unlikely]]
        corrupt(w.head, w.tail);
      if (!try_deliver(d, w.buf + w.head, rb)) return did;
      w.head += rb;
      did = true;
    }
    pool_->put(w.buf);
    --waiting_buffers_;
    d.waiting.pop_front();
  }
  --clients_waiting_;
  return did;
}

bool Router::drain_waiting() {
  if (clients_waiting_ == 0) return false;
  bool did = false;
  for (Delivery& d : deliveries_)
    if (!d.waiting.empty()) did |= drain_waiting(d);
  return did;
}

void Router::publish_delivery(Delivery& d) {
  if (d.data == nullptr || d.used == 0) return;
  d.producer.publish(d.used, 0);  // R1 of the delivery ring: the app's A1 sees every run
  d.data = nullptr;
  d.used = 0;
  d.run.reset();
  ++stats_.chunks_out;
}

void Router::route_runs(const std::uint8_t* data, std::uint32_t size) {
  // The router's inner loop: runs from one app's chunk join the open runs of
  // their destinations, so deliveries and MPI buffers carry longer runs than
  // the apps wrote (a chunk's messages go to many destinations).
  std::uint32_t off = 0;
  std::uint64_t local = 0, forwarded = 0;
  while (off < size) {
    RunHeader h;
    const std::uint32_t rb = read_run(data, size, off, &h);
    if (rb == 0 || h.dest >= cfg_.client_of_app.size()) [[unlikely]]
      corrupt(off, size);
    const int client = cfg_.client_of_app[h.dest];
    const std::uint8_t* payloads = data + off + kRunHeaderBytes;
    if (client >= 0) {
      Delivery& d = deliveries_[static_cast<std::size_t>(client)];
      // The fast path: into the open chunk (none is open while runs wait).
      const std::uint32_t n =
          d.data != nullptr ? d.run.append_payloads(d.data, &d.used, slot_bytes_, h, payloads, h.count) : 0;
      if (n != h.count) [[unlikely]]
        deliver(d, h, payloads + std::size_t{n} * h.len(), h.count - n);
      local += h.count;
    } else {
      if (cfg_.transport == nullptr) [[unlikely]]
        unserved(h.dest);
      cfg_.transport->append_run(cfg_.peer_of_app[h.dest], h, payloads, h.count);
      forwarded += h.count;
    }
    off += rb;
  }
  wire_->frames_local += local;
  wire_->frames_forwarded += forwarded;
  stats_.frames_routed += local + forwarded;
}

void Router::too_large_for_slot(std::uint32_t len) const {
  fatal(std::string(cfg_.name) + ": a " + std::to_string(len) + "-byte message does not fit a " +
        std::to_string(slot_bytes_) + "-byte delivery slot (ranks disagree on ring_slot_bytes?)");
}

void Router::corrupt(std::uint32_t off, std::uint32_t size) const {
  fatal(std::string(cfg_.name) + ": corrupt run at offset " + std::to_string(off) + " of a " +
        std::to_string(size) + "-byte chunk");
}

void Router::unserved(std::uint32_t dest) const {
  fatal(std::string(cfg_.name) + ": run for application rank " + std::to_string(dest) +
        ", which no router serves");
}

bool Router::drain_requests(int client) {
  RingConsumer& c = requests_[static_cast<std::size_t>(client)];
  SlotMessage m;
  int n = 0;
  while (n < kSlotsPerClientPass && c.try_peek(&m)) {  // A1: the chunk's runs and its sent word (Q1)
    route_runs(m.payload.data, static_cast<std::uint32_t>(m.payload.size));
    c.advance();
    ++n;
    ++stats_.chunks_in;
  }
  if (n != 0) c.release();  // R2: the app may reuse those slots
  return n != 0;
}

bool Router::drain_transport() {
  Transport* t = cfg_.transport;
  bool did = t->poll();
  Transport::Received r;
  int n = 0;
  while (n < kBuffersPerPass && t->pop_received(&r)) {
    route_runs(r.buf, r.bytes);
    t->recycle(r.buf);
    ++n;
  }
  return did || n != 0;
}

bool Router::barrier_step() {
  if (!in_barrier_) {
    // A barrier starts when every app of ours waits in it: a round must never
    // read an app that is still computing (it could look quiet, then send).
    for (const ClientSlot& c : clients_) {
      // A4: pairs with the app's release of barrier_request (R4); the counters
      // it stored before are visible from here on.
      if (std::atomic_ref<std::uint32_t>(c.app->barrier_request).load(std::memory_order_acquire) !=
          epoch_ + 1)
        return false;
    }
    in_barrier_ = true;
    quiescence_.reset();
    barrier_progress_ns_ = now_ns();
    last_sent_ = last_handled_ = ~0ull;
  }
  auto sum = [&](std::uint64_t* sent, std::uint64_t* handled) {
    *sent = *handled = 0;
    for (const ClientSlot& c : clients_) {
      *sent += std::atomic_ref<std::uint64_t>(c.app->sent).load(std::memory_order_acquire);        // R3
      *handled += std::atomic_ref<std::uint64_t>(c.app->handled).load(std::memory_order_acquire);  // Q2
    }
  };
  std::uint64_t sent = 0, handled = 0;
  bool complete = false;
  if (cfg_.transport == nullptr) {
    sum(&sent, &handled);
    complete = true;
  } else if (!cfg_.transport->round_in_flight()) {
    sum(&sent, &handled);
    cfg_.transport->start_round(sent, handled);
  } else {
    complete = cfg_.transport->test_round(&sent, &handled);
  }
  if (!complete) return false;
  if (sent != last_sent_ || handled != last_handled_) {
    barrier_progress_ns_ = now_ns();
    last_sent_ = sent;
    last_handled_ = handled;
  }
  if (!quiescence_.complete_round(sent, handled)) return false;
  ++epoch_;
  in_barrier_ = false;
  publish_stats();  // before the release below: an app that leaves the barrier reads them
  for (const ClientSlot& c : clients_)
    // R5: pairs with the app's acquire (A5).
    std::atomic_ref<std::uint32_t>(c.router->barrier_done).store(epoch_, std::memory_order_release);
  return true;
}

bool Router::step() {
  bool did = drain_waiting();  // oldest first: room the apps freed goes to runs that waited
  for (int c : own_) did |= drain_requests(c);
  if (cfg_.transport != nullptr) did |= drain_transport();
  // Statistics before the deliveries they count: the delivery ring's release
  // (R1) carries them to any app that handles those messages, and from there to
  // whoever reads them after a barrier.
  if (did) publish_stats();
  for (Delivery& d : deliveries_) publish_delivery(d);
  if (cfg_.transport != nullptr && cfg_.transport->has_open_buffers()) {
    // In a barrier nothing is worth waiting for: every buffer leaves now. Shards
    // other than 0 see a barrier from app 0 waiting in one (a hint: a late flush
    // only costs flush_us).
    const bool barrier =
        in_barrier_ ||
        (cfg_.shard != 0 && !clients_.empty() &&
         std::atomic_ref<std::uint32_t>(clients_[0].app->barrier_request).load(std::memory_order_relaxed) !=
             std::atomic_ref<std::uint32_t>(clients_[0].router->barrier_done)
                 .load(std::memory_order_relaxed));
    if (barrier)
      did |= cfg_.transport->flush_all();
    else
      did |= cfg_.transport->flush_older_than(now_ns(), flush_ns_);
  }
  if (cfg_.shard == 0) did |= barrier_step();
  return did;
}

void Router::publish_stats() {
  if (cfg_.cpu_time != nullptr) {
    const std::uint64_t now = now_ns();
    if (now - cpu_sampled_ns_ > 1'000'000ull) {  // a CPU-time sample costs ~0.2 us: at most every ms
      cpu_sampled_ns_ = now;
      stats_.cpu_ns = cfg_.cpu_time();
    }
  }
  store_router_stats(cfg_.mailbox->stats_block(cfg_.shard), stats());
}

bool Router::all_detached() const noexcept {
  for (const ClientSlot& c : clients_)
    if (std::atomic_ref<std::uint32_t>(c.app->state).load(std::memory_order_acquire) !=
        static_cast<std::uint32_t>(ClientState::Detached))
      return false;
  return true;
}

void Router::check_clients() {
  for (std::size_t i = 0; i < clients_.size(); ++i) {
    const pid_t pid = static_cast<pid_t>(
        std::atomic_ref<std::uint32_t>(clients_[i].app->pid).load(std::memory_order_relaxed));
    const auto state = std::atomic_ref<std::uint32_t>(clients_[i].app->state).load(std::memory_order_acquire);
    if (pid != 0 && state != static_cast<std::uint32_t>(ClientState::Detached) && kill(pid, 0) != 0 &&
        errno == ESRCH)
      fatal(std::string(cfg_.name) + ": application rank " + std::to_string(clients_[i].app->app_rank) +
            " (pid " + std::to_string(pid) + ") died without detaching");
  }
}

void Router::run() {
  Backoff backoff = idle_backoff(cfg_.options);
  const std::uint64_t stall_ns = std::uint64_t{cfg_.options.stall_timeout_ms} * 1'000'000ull;
  std::uint64_t next_check = now_ns() + kCheckEveryNs;
  for (;;) {
    if (step()) {
      ++stats_.busy_loops;
      backoff.reset();
    } else {
      ++stats_.idle_loops;
      if (all_detached() && !in_barrier_ && clients_waiting_ == 0) break;
      backoff.idle();
    }
    if (((stats_.busy_loops + stats_.idle_loops) & 255) != 0) continue;
    const std::uint64_t now = now_ns();
    if (now < next_check) continue;
    next_check = now + kCheckEveryNs;
    if (cfg_.check_client_pids && cfg_.shard == 0) check_clients();
    if (in_barrier_ && now - barrier_progress_ns_ > stall_ns)
      fatal(std::string(cfg_.name) + ": barrier " + std::to_string(epoch_ + 1) + " made no progress for " +
            std::to_string((now - barrier_progress_ns_) / 1'000'000'000ull) + " s (" +
            totals_text(last_sent_, last_handled_) + "); a rank or router is dead or stuck");
  }
  cpu_sampled_ns_ = 0;
  publish_stats();
}

RouterStats Router::stats() const {
  RouterStats s = stats_;
  s.wire = *wire_;
  s.wire.pool_buffers = pool_->allocated();
  return s;
}

}  // namespace ferry::route::detail
