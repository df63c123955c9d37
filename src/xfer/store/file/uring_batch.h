#pragma once
// The file tier's io_uring loop, shared by object puts and gets, pack writes and
// compaction reads: many independent transfers kept in flight on one ring.

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "xfer/store/file/uring.h"

namespace ferry::xfer::store {

// Moves an iovec array past `n` bytes that were transferred (a short read or write).
void advance_iov(iovec* iov, int* count, std::size_t n);

// Never null: at most entries() operations are in flight, one SQE each, and
// everything queued is submitted before the next wait.
inline io_uring_sqe* next_sqe(Uring& ring) {
  return io_uring_get_sqe(ring.get());
}

// Submits what is queued and waits for at least one completion; a failing
// submit is retried (loudly): the kernel owns the queued SQEs and their buffers,
// so the caller cannot return before they complete. Returns (user_data, res) of
// every completion reaped.
void submit_and_reap(Uring& ring, std::vector<std::pair<std::size_t, int>>* done);

// Runs `count` items through the ring with at most slots.size() in flight.
// start(item, slot) queues an SQE (user_data = the slot's index) and returns
// true, or settles the item and returns false. complete(slot, res) returns true
// when it queued another SQE for the slot (a short transfer or a retry), false
// when the slot's item is settled.
template <class Slot, class Start, class Complete>
void run_batch(Uring& ring, std::vector<Slot>& slots, std::size_t count, Start start, Complete complete) {
  std::vector<std::size_t> free_slots;
  for (std::size_t s = slots.size(); s-- > 0;) free_slots.push_back(s);
  std::size_t next = 0;
  std::size_t in_flight = 0;
  std::vector<std::pair<std::size_t, int>> done;
  const auto fill = [&] {
    bool queued = false;
    while (!free_slots.empty() && next < count) {
      const std::size_t s = free_slots.back();
      if (start(next++, slots[s])) {
        free_slots.pop_back();
        ++in_flight;
        queued = true;
      }
    }
    return queued;
  };
  while (next < count || in_flight > 0) {
    fill();
    if (in_flight == 0) continue;
    submit_and_reap(ring, &done);
    for (std::size_t k = 0; k < done.size(); ++k) {
      const auto [s, res] = done[k];
      if (complete(slots[s], res)) continue;
      free_slots.push_back(s);
      --in_flight;
      // Refill the slot and submit now, not after the whole reap: each of the
      // completions still to handle may take tens of microseconds (a get's
      // checksum, a put's close and rename), and the device's queue would stay
      // that much shorter meanwhile. (A failed submit leaves the SQEs queued:
      // the next submit_and_reap sends them.)
      if (k + 1 < done.size() && fill()) io_uring_submit(ring.get());
    }
  }
}

}  // namespace ferry::xfer::store
