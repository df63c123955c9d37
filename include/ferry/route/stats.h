#pragma once
// Per-rank statistics of the router. Plain counters: the engine fills them on
// the data path without locks, and the applications print and serialise them.

#include <cstdint>

namespace ferry::route {

// What goes over MPI: aggregation buffers, filled by whoever calls MPI (the
// application thread in inline mode, the progress thread or the router process).
struct WireStats {
  std::uint64_t buffers_sent = 0;  // MPI messages sent (one per flushed aggregation buffer)
  std::uint64_t bytes_sent = 0;    // bytes in them, run headers included
  std::uint64_t buffers_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t timed_flushes = 0;     // buffers that left partly filled because of flush_us
  std::uint64_t forced_flushes = 0;    // buffers that left partly filled because of a barrier
  std::uint64_t frames_forwarded = 0;  // messages passed on to their next hop (nlnr routing, routers)
  std::uint64_t frames_local = 0;      // messages delivered without MPI (to this node's apps, or to self)
  std::uint64_t send_slot_waits = 0;   // times max_outstanding buffers were in flight and a sender waited
  std::uint64_t max_in_flight = 0;     // most send buffers in flight at once
  std::uint64_t rounds = 0;            // quiescence all-reduce rounds
  std::uint64_t pool_buffers = 0;      // aggregation buffers allocated (the pool grows on demand)
  std::uint64_t capacity_bytes = 0;  // one buffer's capacity: occupancy = bytes_sent / (buffers_sent * this)
};

// The application's side of one rank.
struct Stats {
  std::uint64_t msgs_sent = 0;       // send() calls
  std::uint64_t bytes_sent = 0;      // their payload bytes
  std::uint64_t msgs_received = 0;   // handlers run on this rank
  std::uint64_t bytes_received = 0;  // their payload bytes
  std::uint64_t flushes = 0;  // buffers (inline) or ring chunks (thread, process) the app thread handed on
  std::uint64_t flush_bytes = 0;  // bytes in them; occupancy = flush_bytes / (flushes * chunk_bytes)
  std::uint64_t chunk_bytes = 0;  // capacity of one such buffer or chunk
  std::uint64_t full_waits = 0;   // times the app thread waited for buffer or ring space
  std::uint64_t barriers = 0;
  std::uint64_t handler_ns = 0;  // time in handlers (measured per delivered batch)
  std::uint64_t comm_ns = 0;     // time in progress()/barrier() and in send()'s slow path
                                 // (flush, waits), handlers excluded; the append fast path is not timed
  std::uint64_t barrier_ns = 0;  // the part of comm_ns spent in barrier(): waiting for quiescence
  WireStats wire;                // inline: this rank's MPI traffic; thread: its progress thread's
};

// The router process of a node (process mode), read from its shared mailbox.
struct RouterStats {
  std::uint64_t clients = 0;
  std::uint64_t chunks_in = 0;   // request chunks read from the apps' rings
  std::uint64_t chunks_out = 0;  // delivery chunks written to the apps' rings
  std::uint64_t frames_routed = 0;
  std::uint64_t pending_max = 0;  // most buffers of runs held for apps whose delivery ring was full
  std::uint64_t busy_loops = 0;
  std::uint64_t idle_loops = 0;
  std::uint64_t cpu_ns = 0;      // the router process's CPU time (user + system) at the last barrier
  std::uint64_t world_rank = 0;  // which router (one per node)
  WireStats wire;
};

}  // namespace ferry::route
