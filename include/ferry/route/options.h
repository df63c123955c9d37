#pragma once
// Settings of the message router, chosen at start without touching application
// code: defaults, then FERRY_ROUTE_* environment variables, then --route-* flags
// (which ferry::route::Runtime strips from argv before the application parses it).
//
//   setting            env / flag                          default
//   mode               FERRY_ROUTE_MODE / --route-mode     inline  (inline | thread | process)
//   routing            FERRY_ROUTE_ROUTING                 direct  (direct | nlnr: node-local, then
//   node-remote) buffer_bytes       FERRY_ROUTE_BUFFER_BYTES            65536   aggregation buffer per
//   destination max_outstanding    FERRY_ROUTE_MAX_OUTSTANDING         16      send buffers in flight per
//   sender flush_us           FERRY_ROUTE_FLUSH_US                200     a partly filled buffer leaves after
//   this recv_buffers       FERRY_ROUTE_RECV_BUFFERS            8       receives kept posted ring_slots
//   FERRY_ROUTE_RING_SLOTS              64      slots per app<->router ring ring_slot_bytes
//   FERRY_ROUTE_RING_SLOT_BYTES         16384   bytes per ring slot (one chunk of runs) node_size
//   FERRY_ROUTE_NODE_SIZE               0       0: MPI's shared-memory split; k: virtual
//                                                                   nodes of k consecutive world ranks
//   app_cpus           FERRY_ROUTE_APP_CPUS                ""      pin application rank i of a host to the
//   i-th progress_cpus      FERRY_ROUTE_PROGRESS_CPUS           ""      pin thread-mode progress thread i
//   likewise router_cpus        FERRY_ROUTE_ROUTER_CPUS             ""      pin router i of a host likewise
//                      (i counts per host, across virtual nodes: they never share a core)
//   router_threads     FERRY_ROUTE_ROUTER_THREADS          auto    threads of each router process (1..8, or
//                                                                   auto: one per 2 applications of the
//                                                                   largest node): the node's apps are shared
//                                                                   among them, as among a DPU's cores
//   stall_timeout_ms   FERRY_ROUTE_STALL_TIMEOUT_MS        60000   a wait that makes no progress this long
//                                                                   aborts the job with a message
//   idle_spins         FERRY_ROUTE_IDLE_SPINS              0       pause rounds before an idle wait yields;
//                                                                   0: 2000, or 20 when the node has more
//                                                                   polling threads than CPUs
//
// Every env name has a flag spelled --route-<name with dashes>, e.g.
// --route-buffer-bytes=4096. CPU lists are "0-3,8,10".

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::route {

enum class Mode : std::uint32_t {
  Inline = 0,   // the application thread aggregates, calls MPI and runs handlers
  Thread = 1,   // a progress thread per rank aggregates and calls MPI; handlers stay on the app thread
  Process = 2,  // one router process per node aggregates and calls MPI; apps only touch shared rings
};

enum class Routing : std::uint32_t {
  Direct = 0,           // every rank sends straight to every destination
  NodeLocalRemote = 1,  // off-node messages go first to the local rank that serves the destination's
                        // local index, which sends them on (one remote peer per node instead of all)
};

const char* to_string(Mode m) noexcept;
const char* to_string(Routing r) noexcept;

struct Options {
  Mode mode = Mode::Inline;
  Routing routing = Routing::Direct;
  std::uint32_t buffer_bytes = 64 * 1024;
  std::uint32_t max_outstanding = 16;
  std::uint32_t flush_us = 200;
  std::uint32_t recv_buffers = 8;
  std::uint32_t ring_slots = 64;
  std::uint32_t ring_slot_bytes = 16 * 1024;
  std::uint32_t node_size = 0;
  std::vector<int> app_cpus;
  std::vector<int> progress_cpus;
  std::vector<int> router_cpus;
  std::uint32_t router_threads = 0;  // 0: auto, resolved by the Runtime
  std::uint32_t stall_timeout_ms = 60'000;
  std::uint32_t idle_spins = 0;

  // Defaults overridden by FERRY_ROUTE_* variables. Throws ferry::Error naming
  // the variable and the value it could not use.
  static Options from_env();

  // Applies --route-NAME=VALUE and --route-NAME VALUE flags and removes them
  // from argv (argc shrinks), so the application's own parser never sees them.
  // Throws ferry::Error for an unknown --route-* flag or a bad value.
  void apply_args(int* argc, char*** argv);

  // Sets one setting by its env-style name ("buffer_bytes") or flag-style name
  // ("buffer-bytes"). Throws ferry::Error.
  void set(const std::string& name, const std::string& value);

  // Throws ferry::Error when the settings cannot work together.
  void validate() const;

  // Largest payload one message may carry: a run of one must fit a buffer and a ring slot.
  std::uint32_t max_payload() const noexcept;

  // One line, for logs and the benchmark's JSON.
  std::string describe() const;
};

// Parses "0-3,8" into {0,1,2,3,8}. Throws ferry::Error.
std::vector<int> parse_cpu_list(const std::string& text);

}  // namespace ferry::route
