#pragma once
// The arena's control words in one place, for the host side of every backend,
// the orchestrator and the server. The GPU's mirrors of these edges are in
// ferry/worker/cuda/device_ring.cuh and name the host edge each pairs with.
//
//   stop          written by the host role      S1: release here  <->  S2: acquire in every worker's poll
//   worker_error  written by workers            E1: first error wins (CAS from 0); E2: acquire to read it
//   handled       written by a channel's worker P1: relaxed progress count, read for hang detection only
//
// handled orders nothing: responses are published through the rings' own
// release/acquire pairs (slot_ring.h), so a relaxed count is enough for a
// watchdog that only asks "did it move?".

#include <atomic>
#include <cstdint>

#include "ferry/core/arena.h"

namespace ferry::arena_control {

// Asks every worker of the arena to stop (S1).
inline void request_stop(ArenaHeader& h) noexcept {
  std::atomic_ref<std::uint32_t>(h.stop).store(1, std::memory_order_release);
}
// Lowers the stop flag again (after a warm-up launch that found it set).
inline void clear_stop(ArenaHeader& h) noexcept {
  std::atomic_ref<std::uint32_t>(h.stop).store(0, std::memory_order_release);
}
// True once stop was requested (S2: pairs with request_stop's release).
inline bool stop_requested(const ArenaHeader& h) noexcept {
  return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(h.stop)).load(std::memory_order_acquire) != 0;
}

// Records a worker's error code (nonzero). The first report wins and later ones
// are dropped (E1: a CAS from 0). Returns true when this report is the one kept.
inline bool report_error(ArenaHeader& h, std::uint32_t code) noexcept {
  std::uint32_t none = 0;
  return std::atomic_ref<std::uint32_t>(h.worker_error)
      .compare_exchange_strong(none, code, std::memory_order_acq_rel, std::memory_order_acquire);
}
// The error kept, or 0 while every worker is healthy (E2).
inline std::uint32_t first_error(const ArenaHeader& h) noexcept {
  return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(h.worker_error)).load(std::memory_order_acquire);
}

// A channel's worker publishes how many messages it has answered (P1).
inline void publish_handled(ChannelHeader& c, std::uint64_t handled) noexcept {
  std::atomic_ref<std::uint64_t>(c.handled).store(handled, std::memory_order_relaxed);
}
inline std::uint64_t handled(const ChannelHeader& c) noexcept {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(c.handled)).load(std::memory_order_relaxed);
}
// Messages answered over every channel of the arena.
inline std::uint64_t total_handled(const Arena& arena) {
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < arena.num_channels(); ++i) total += handled(*arena.channel(i).header);
  return total;
}

}  // namespace ferry::arena_control
