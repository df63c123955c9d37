#pragma once
// The application's end of a mailbox (thread and process mode): runs are
// written straight into the open slot of the request ring (one chunk), and
// chunks from the delivery ring are read in place. The application thread
// touches nothing else: no MPI, no per-destination buffers.
//
// The quiescence rule (quiescence.h relies on it):
//   Q1  the `sent` word covering every message of a chunk is stored before the
//       chunk is published (release R3, then the ring's R1);
//   Q2  `handled` is stored only while no message is unpublished, so every
//       handler it counts has its sends already published and counted.
// Without Q2 a rank could report a handled message whose reply still sat in
// its open chunk, and the totals could balance with that reply unseen.

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "ferry/core/slot_ring.h"
#include "ferry/route/options.h"
#include "route/fatal.h"
#include "route/mailbox.h"
#include "route/run.h"

namespace ferry::route::detail {

class ClientPort {
 public:
  ClientPort(ClientSlot slot, const MailboxHeader* header, const Options& options)
      : options_(options),
        slot_(slot),
        header_(header),
        producer_(slot.requests),
        rings_(slot.delivery_rings),
        capacity_(slot.requests.slot_size()),
        stall_ns_(std::uint64_t{options.stall_timeout_ms} * 1'000'000ull) {
    for (std::uint32_t r = 0; r < rings_; ++r) consumers_[r] = RingConsumer(slot.deliveries[r]);
  }

  // Room for one payload of `len` bytes to `dest` in the open chunk, joining
  // its last run when the key matches; publishes the chunk and claims the next
  // slot when it is full, waiting while the ring is full.
  std::uint8_t* append(std::uint32_t dest, std::uint32_t src, std::uint16_t handler, std::uint32_t len) {
    if (chunk_ != nullptr) [[likely]] {
      if (std::uint8_t* at = run_.append(chunk_, &used_, capacity_, dest, src, handler, len)) [[likely]]
        return at;
    }
    open_chunk(len);
    return run_.append(chunk_, &used_, capacity_, dest, src, handler, len);
  }
  void count_sent() noexcept { ++sent_; }

  // Publishes the open chunk when it holds runs (Q1).
  void publish_chunk() noexcept {
    if (used_ == 0) return;
    // R3: release orders this count before the chunk's seq release (R1), so a
    // router that reads the chunk (A1) and then this word sees it covered (Q1).
    std::atomic_ref<std::uint64_t>(slot_.app->sent).store(sent_, std::memory_order_release);
    producer_.publish(used_, 0);
    ++chunks_;
    chunk_bytes_ += used_;
    chunk_ = nullptr;
    used_ = 0;
    run_.reset();
  }
  bool has_unpublished() const noexcept { return used_ != 0; }
  std::uint64_t chunk_since() const noexcept { return since_; }

  // Stores the handled count when every message is published (Q2); pairs with
  // the router's acquire when it sums a round.
  void publish_handled(std::uint64_t handled) noexcept {
    if (used_ != 0) return;
    std::atomic_ref<std::uint64_t>(slot_.app->handled).store(handled, std::memory_order_release);
  }

  // Delivery chunks, read in place, from ring r (one per router thread);
  // release(r) hands ring r's slots back to its router thread.
  std::uint32_t delivery_rings() const noexcept { return rings_; }
  bool peek(std::uint32_t r, SlotMessage* m) const noexcept { return consumers_[r].try_peek(m); }
  void advance(std::uint32_t r) noexcept { consumers_[r].advance(); }
  void release(std::uint32_t r) noexcept { consumers_[r].release(); }

  // The barrier handshake: the app asks for epoch e; the router answers with
  // barrier_done = e once the totals were quiescent.
  void request_barrier(std::uint32_t epoch) noexcept {
    // R4: release after the counters stored above; pairs with the router's acquire (A4).
    std::atomic_ref<std::uint32_t>(slot_.app->barrier_request).store(epoch, std::memory_order_release);
  }
  bool barrier_done(std::uint32_t epoch) const noexcept {
    // A5: pairs with the router's release of barrier_done (R5).
    return std::atomic_ref<std::uint32_t>(slot_.router->barrier_done).load(std::memory_order_acquire) ==
           epoch;
  }
  void set_state(ClientState s) noexcept {
    std::atomic_ref<std::uint32_t>(slot_.app->state)
        .store(static_cast<std::uint32_t>(s), std::memory_order_release);
  }

  // While waiting: aborts the job with a message when the router process died
  // or reported a failure. Cheap enough to call every ~100 ms.
  void check_router() const;

  std::uint64_t chunks() const noexcept { return chunks_; }
  std::uint64_t chunk_bytes() const noexcept { return chunk_bytes_; }
  std::uint64_t full_waits() const noexcept { return full_waits_; }
  std::uint64_t wait_ns() const noexcept { return wait_ns_; }
  std::uint32_t capacity() const noexcept { return capacity_; }

 private:
  // Publishes the open chunk, if any, and claims an empty one for a payload of `len` bytes.
  void open_chunk(std::uint32_t len);

  Options options_;
  ClientSlot slot_;
  const MailboxHeader* header_;
  RingProducer producer_;
  std::uint32_t rings_;
  RingConsumer consumers_[kMaxRouterThreads];
  std::uint32_t capacity_;
  std::uint64_t stall_ns_;
  std::uint8_t* chunk_ = nullptr;
  std::uint32_t used_ = 0;
  RunCursor run_;  // the run the open chunk ends with
  std::uint64_t since_ = 0;
  std::uint64_t sent_ = 0;
  std::uint64_t chunks_ = 0;
  std::uint64_t chunk_bytes_ = 0;
  std::uint64_t full_waits_ = 0;
  std::uint64_t wait_ns_ = 0;
};

}  // namespace ferry::route::detail
