#pragma once
// The router: serves the application ranks of one mailbox. It reads their
// request chunks, sends each run on (to a local app's delivery ring, or into
// the Transport's buffer for the run's next hop), delivers what arrives over
// MPI, and runs the quiescence rounds of their barriers.
//
// It is the progress thread of one rank in thread mode (one client, peers are
// application ranks) and a thread of the router process of a node in process
// mode (peers are the same thread of the other routers). With no Transport it
// is the only router and every destination is local (one node, or a unit test).
//
// A router process may run several Router threads ("shards"): shard k reads the
// request rings of the apps with index % shards == k, writes delivery ring k of
// every app (so each ring keeps one producer), and sends over its own Transport
// to shard k of the other routers. Shard 0 alone runs the barrier handshake and
// the quiescence rounds: the counts live with the apps, so it needs nothing from
// the other shards (what they hold is counted as sent and not yet handled).
//
// It never waits for an application: a run for an app whose delivery ring is
// full waits in that app's own queue (router memory) and goes first once the
// app frees a slot, so an app that waits for request-ring space can never
// deadlock against its router, and an app that falls behind holds up only the
// runs addressed to it: the others' keep flowing (one shared queue made every
// app wait behind the slowest one's backlog; qs-mini's cycle ends showed it).

#include <cstdint>
#include <deque>
#include <vector>

#include "ferry/route/options.h"
#include "ferry/route/stats.h"
#include "route/buffer_pool.h"
#include "route/mailbox.h"
#include "route/quiescence.h"
#include "route/run.h"
#include "route/transport.h"

namespace ferry::route::detail {

// CPU time of the calling thread, in ns: RouterConfig::cpu_time for a router
// on its own thread (in a thread or a process), so that the shards' times add
// up to the router's and MPI's own helper threads are left out.
std::uint64_t thread_cpu_ns();

struct RouterConfig {
  Options options;
  Mailbox* mailbox = nullptr;
  std::vector<int> client_of_app;  // app rank -> client index in the mailbox, -1 when not ours
  std::vector<int> peer_of_app;    // app rank -> Transport peer of its next hop (unused for local apps)
  Transport* transport = nullptr;  // null: single router
  bool check_client_pids = false;  // process mode: apps are other processes
  const char* name = "router";     // for messages
  std::uint32_t shard = 0;         // this router thread, of `shards`
  std::uint32_t shards = 1;
  std::uint64_t (*cpu_time)() = nullptr;  // CPU time of this router thread, for RouterStats
};

class Router {
 public:
  Router(RouterConfig config, BufferPool* pool, WireStats* wire);

  // One pass over everything; true when it moved anything.
  bool step();
  // Steps until every client has detached (bounded waits: fatal on a stall or
  // a dead client).
  void run();

  bool all_detached() const noexcept;
  RouterStats stats() const;
  std::uint32_t epoch() const noexcept { return epoch_; }
  void set_world_rank(int rank) noexcept { stats_.world_rank = static_cast<std::uint64_t>(rank); }

 private:
  // Frames for one app that its delivery ring had no room for, copied into a
  // pool buffer: [head, tail) still wait.
  struct Waiting {
    std::uint8_t* buf;
    std::uint32_t head;
    std::uint32_t tail;
  };
  // One app's delivery ring, its open chunk, and the runs waiting for room in
  // it, oldest first. Invariant: while runs wait, no chunk is open (data is
  // null), so deliver() never passes them.
  struct Delivery {
    RingProducer producer;
    std::uint8_t* data = nullptr;
    std::uint32_t used = 0;
    RunCursor run;  // the run the open chunk ends with
    std::deque<Waiting> waiting;
  };

  void route_runs(const std::uint8_t* data, std::uint32_t size);
  void deliver(Delivery& d, const RunHeader& h, const std::uint8_t* payloads, std::uint32_t count);
  bool try_deliver(Delivery& d, const std::uint8_t* run, std::uint32_t bytes);
  void wait_for_room(Delivery& d, const RunHeader& h, const std::uint8_t* payloads, std::uint32_t count);
  bool drain_waiting(Delivery& d);
  [[noreturn]] void corrupt(std::uint32_t off, std::uint32_t size) const;
  [[noreturn]] void too_large_for_slot(std::uint32_t len) const;
  [[noreturn]] void unserved(std::uint32_t dest) const;
  void publish_delivery(Delivery& d);
  bool drain_waiting();
  bool drain_requests(int client);
  bool drain_transport();
  bool barrier_step();
  void check_clients();
  void publish_stats();

  RouterConfig cfg_;
  BufferPool* pool_;
  WireStats* wire_;
  std::vector<ClientSlot> clients_;
  std::vector<int> own_;                // the clients whose request rings this shard reads
  std::vector<RingConsumer> requests_;  // indexed by client (only own_ ones are used)
  std::vector<Delivery> deliveries_;    // indexed by client
  std::uint32_t clients_waiting_ = 0;   // deliveries with waiting runs
  std::uint64_t waiting_buffers_ = 0;   // pool buffers holding them
  std::uint32_t slot_bytes_;
  std::uint64_t flush_ns_;

  // Barrier state.
  std::uint32_t epoch_ = 0;
  bool in_barrier_ = false;
  Quiescence quiescence_;
  std::uint64_t barrier_progress_ns_ = 0;
  std::uint64_t last_sent_ = ~0ull, last_handled_ = ~0ull;

  RouterStats stats_;
  std::uint64_t cpu_sampled_ns_ = 0;
};

}  // namespace ferry::route::detail
