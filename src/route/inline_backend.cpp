#include "route/inline_backend.h"

#include <string>

#include "ferry/route/engine.h"
#include "route/fatal.h"
#include "route/idle.h"

namespace ferry::route::detail {
namespace {
constexpr int kBuffersPerProgress = 64;  // progress() returns to the app after this many
}

InlineBackend::InlineBackend(Engine& engine, MPI_Comm comm, const Options& options, const Topology& topology)
    : Backend(engine),
      options_(options),
      me_(static_cast<std::uint32_t>(topology.app_rank)),
      flush_ns_(std::uint64_t{options.flush_us} * 1000ull),
      stall_ns_(std::uint64_t{options.stall_timeout_ms} * 1'000'000ull),
      pool_(options.buffer_bytes),
      transport_(comm, options, &pool_, &stats_.wire) {
  next_hop_.resize(static_cast<std::size_t>(topology.app_size));
  for (int d = 0; d < topology.app_size; ++d)
    next_hop_[static_cast<std::size_t>(d)] = topology.next_hop(d, options.routing);
  stats_.chunk_bytes = options.buffer_bytes;
}

void InlineBackend::run_buffer(const Transport::Received& r) {
  const std::uint64_t t0 = now_ns();
  in_handler_ = true;
  std::size_t off = 0;
  while (off < r.bytes) {
    RunHeader h;
    const std::uint32_t rb = read_run(r.buf, r.bytes, off, &h);
    if (rb == 0)
      fatal("rank " + std::to_string(me_) + ": corrupt run at offset " + std::to_string(off) + " of a " +
            std::to_string(r.bytes) + "-byte buffer from rank " + std::to_string(r.source));
    if (h.dest == me_) {
      engine_.dispatch(static_cast<int>(h.src), h.handler, r.buf + off + kRunHeaderBytes, h.len(), h.count);
      stats_.msgs_received += h.count;
      stats_.bytes_received += std::uint64_t{h.len()} * h.count;
      if (r.source == static_cast<int>(me_)) stats_.wire.frames_local += h.count;
    } else {  // nlnr: we are the first hop, pass the run on
      if (h.dest >= next_hop_.size()) fatal("run for rank " + std::to_string(h.dest) + ", out of range");
      transport_.append_run(next_hop_[h.dest], h, r.buf + off + kRunHeaderBytes, h.count);
      stats_.wire.frames_forwarded += h.count;
    }
    off += rb;
  }
  in_handler_ = false;
  stats_.handler_ns += now_ns() - t0;
}

bool InlineBackend::run_received(int max_buffers) {
  Transport::Received r;
  int n = 0;
  while (n < max_buffers && transport_.pop_received(&r)) {
    run_buffer(r);
    transport_.recycle(r.buf);
    ++n;
  }
  return n != 0;
}

void InlineBackend::progress() {
  const std::uint64_t t0 = now_ns();
  const std::uint64_t h0 = stats_.handler_ns;
  transport_.poll();
  if (transport_.has_open_buffers()) transport_.flush_older_than(t0, flush_ns_);
  run_received(kBuffersPerProgress);
  stats_.comm_ns += (now_ns() - t0) - (stats_.handler_ns - h0);
}

void InlineBackend::barrier() {
  const std::uint64_t t0 = now_ns();
  const std::uint64_t h0 = stats_.handler_ns;
  ++stats_.barriers;
  Quiescence q;
  Backoff backoff = idle_backoff(options_);
  StallClock stall(stall_ns_);
  std::uint64_t last_sent = ~0ull, last_handled = ~0ull;
  for (;;) {
    bool did = transport_.poll();
    did |= run_received(kBuffersPerProgress);
    did |= transport_.flush_all();
    if (!transport_.round_in_flight()) {
      // This thread is the only one touching the counters: the snapshot is exact.
      transport_.start_round(stats_.msgs_sent, stats_.msgs_received);
    } else {
      std::uint64_t sent = 0, handled = 0;
      if (transport_.test_round(&sent, &handled)) {
        if (q.complete_round(sent, handled)) break;
        if (sent != last_sent || handled != last_handled) {
          last_sent = sent;
          last_handled = handled;
          did = true;
        }
      }
    }
    if (did) {
      backoff.reset();
      stall.progressed();
      continue;
    }
    if (stall.stalled())
      fatal("rank " + std::to_string(me_) + ": barrier made no progress for " +
            std::to_string(stall.seconds()) + " s (" + totals_text(last_sent, last_handled) +
            "); a rank is dead, stuck in a handler, or not calling barrier()");
    backoff.idle();
  }
  const std::uint64_t spent = (now_ns() - t0) - (stats_.handler_ns - h0);
  stats_.comm_ns += spent;
  stats_.barrier_ns += spent;
}

Stats InlineBackend::stats() const {
  Stats s = stats_;
  s.flushes = s.wire.buffers_sent;
  s.flush_bytes = s.wire.bytes_sent;
  s.full_waits = s.wire.send_slot_waits;
  s.wire.pool_buffers = pool_.allocated();
  return s;
}

}  // namespace ferry::route::detail
