#pragma once
// How the route's waits idle. A poller on its own core should spin (the next
// message is microseconds away); pollers that share cores must yield at once,
// or each burns its time slice while the rank it waits for cannot run (the
// "collapse" of oversubscribed polling engines). Options::idle_spins picks the
// spin budget; 0 means decide from the node's pollers and its CPUs.

#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "ferry/core/detail/backoff.h"
#include "ferry/route/options.h"

namespace ferry::route::detail {

inline constexpr std::uint32_t kSpinsWithOwnCore = 2000;
inline constexpr std::uint32_t kSpinsOversubscribed = 20;

// Fills in idle_spins when it is 0 (auto), given how many polling threads the
// node runs (application ranks, progress threads, routers).
inline void resolve_idle_spins(Options& o, std::size_t pollers_on_node) {
  if (o.idle_spins != 0) return;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  o.idle_spins =
      cpus > 0 && pollers_on_node > static_cast<std::size_t>(cpus) ? kSpinsOversubscribed : kSpinsWithOwnCore;
}

inline Backoff idle_backoff(const Options& o) {
  const std::uint32_t spins = o.idle_spins == 0 ? kSpinsWithOwnCore : o.idle_spins;
  return Backoff(spins, spins < 100 ? 20 : 200, 50'000);
}

}  // namespace ferry::route::detail
