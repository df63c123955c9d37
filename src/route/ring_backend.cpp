#include "route/ring_backend.h"

#include <string>

#include "ferry/route/engine.h"
#include "route/fatal.h"
#include "route/idle.h"
#include "route/router_thread.h"

namespace ferry::route::detail {
namespace {
constexpr int kChunksPerProgress = 16;
constexpr std::uint64_t kCheckEveryNs = 100'000'000ull;
}  // namespace

RingBackend::RingBackend(Engine& engine, const Options& options, int app_rank, const Mailbox& mailbox,
                         std::uint32_t client)
    : Backend(engine),
      options_(options),
      me_(static_cast<std::uint32_t>(app_rank)),
      mailbox_(&mailbox),
      port_(mailbox.client(client), mailbox.header(), options),
      flush_ns_(std::uint64_t{options.flush_us} * 1000ull),
      stall_ns_(std::uint64_t{options.stall_timeout_ms} * 1'000'000ull) {
  stats_.chunk_bytes = port_.capacity();
}

RingBackend::RingBackend(Engine& engine, const Options& options, int app_rank,
                         std::unique_ptr<RouterThread> router)
    : Backend(engine),
      options_(options),
      me_(static_cast<std::uint32_t>(app_rank)),
      router_(std::move(router)),
      mailbox_(&router_->mailbox()),
      port_(router_->mailbox().client(0), router_->mailbox().header(), options),
      flush_ns_(std::uint64_t{options.flush_us} * 1000ull),
      stall_ns_(std::uint64_t{options.stall_timeout_ms} * 1'000'000ull) {
  stats_.chunk_bytes = port_.capacity();
}

RingBackend::~RingBackend() = default;

bool RingBackend::run_deliveries(int max_chunks) {
  SlotMessage m;
  int total = 0;
  const std::uint64_t t0 = now_ns();
  in_handler_ = true;
  // One ring per router thread; each gets its share of the batch.
  for (std::uint32_t r = 0; r < port_.delivery_rings(); ++r) {
    int n = 0;
    while (n < max_chunks && port_.peek(r, &m)) {  // A1: the router's runs in this chunk are visible
      const std::uint8_t* data = m.payload.data;
      const std::size_t size = m.payload.size;
      std::size_t off = 0;
      while (off < size) {
        RunHeader h;
        const std::uint32_t rb = read_run(data, size, off, &h);
        if (rb == 0 || h.dest != me_)
          fatal("rank " + std::to_string(me_) + ": corrupt delivery chunk from the router (offset " +
                std::to_string(off) + " of " + std::to_string(size) + ")");
        engine_.dispatch(static_cast<int>(h.src), h.handler, data + off + kRunHeaderBytes, h.len(), h.count);
        stats_.msgs_received += h.count;
        stats_.bytes_received += std::uint64_t{h.len()} * h.count;
        off += rb;
      }
      port_.advance(r);
      ++n;
    }
    if (n != 0) port_.release(r);
    total += n;
  }
  in_handler_ = false;
  if (total == 0) return false;
  stats_.handler_ns += now_ns() - t0;
  return true;
}

void RingBackend::progress() {
  const std::uint64_t t0 = now_ns();
  const std::uint64_t h0 = stats_.handler_ns;
  run_deliveries(kChunksPerProgress);
  // Aggregation happens in the router; the app only bounds how long a partly
  // filled chunk may sit unseen.
  if (port_.has_unpublished() && t0 - port_.chunk_since() >= flush_ns_) port_.publish_chunk();
  port_.publish_handled(stats_.msgs_received);
  stats_.comm_ns += (now_ns() - t0) - (stats_.handler_ns - h0);
}

void RingBackend::barrier() {
  const std::uint64_t t0 = now_ns();
  const std::uint64_t h0 = stats_.handler_ns;
  ++stats_.barriers;
  ++epoch_;
  port_.publish_chunk();
  port_.publish_handled(stats_.msgs_received);
  port_.request_barrier(epoch_);
  Backoff backoff = idle_backoff(options_);
  StallClock stall(stall_ns_);
  std::uint64_t next_check = t0 + kCheckEveryNs;
  for (;;) {
    const bool did = run_deliveries(kChunksPerProgress);
    // Q1 then Q2: what the handlers sent leaves before their count does.
    port_.publish_chunk();
    port_.publish_handled(stats_.msgs_received);
    if (port_.barrier_done(epoch_)) break;
    if (did) {
      backoff.reset();
      stall.progressed();
      continue;
    }
    backoff.idle();
    const std::uint64_t now = now_ns();
    if (now >= next_check) {
      next_check = now + kCheckEveryNs;
      port_.check_router();
      if (stall.stalled())
        fatal("rank " + std::to_string(me_) + ": barrier " + std::to_string(epoch_) +
              " has had no answer from " + "the router for " + std::to_string(stall.seconds()) + " s");
    }
  }
  const std::uint64_t spent = (now_ns() - t0) - (stats_.handler_ns - h0);
  stats_.comm_ns += spent;
  stats_.barrier_ns += spent;
}

void RingBackend::finish() {
  if (finished_) return;
  finished_ = true;
  barrier();
  port_.set_state(ClientState::Detached);
  if (router_) router_->join();
}

Stats RingBackend::stats() const {
  Stats s = stats_;
  s.flushes = port_.chunks();
  s.flush_bytes = port_.chunk_bytes();
  s.full_waits = port_.full_waits();
  s.comm_ns += port_.wait_ns();
  if (router_) s.wire = load_router_stats(*mailbox_).wire;  // thread mode: our progress thread's wire
  return s;
}

bool RingBackend::router_stats(RouterStats* out) const {
  if (router_) return false;  // thread mode: Stats::wire already holds it
  *out = load_router_stats(*mailbox_);
  return true;
}

}  // namespace ferry::route::detail
