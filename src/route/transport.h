#pragma once
// Aggregation over MPI: one buffer per peer that fills with runs and leaves as
// one MPI message when full, when it has waited flush_us, or at a barrier; a
// bounded number of buffers in flight (max_outstanding); receives kept posted
// (recv_buffers) into pool buffers that queue until their owner runs them; and
// the quiescence rounds, one MPI_Iallreduce of {sent, handled} at a time.
//
// One thread owns a Transport: the application thread (inline mode), the
// progress thread (thread mode) or the router process. It never runs handlers
// itself: received buffers wait in a queue for pop_received(), so a sender that
// waits for a send slot keeps receiving without re-entering a handler.

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "ferry/route/options.h"
#include "ferry/route/stats.h"
#include "route/buffer_pool.h"
#include "route/run.h"

namespace ferry::route::detail {

class Transport {
 public:
  struct Received {
    std::uint8_t* buf = nullptr;
    std::uint32_t bytes = 0;
    int source = -1;
  };

  // Duplicates comm (collective over it). pool buffers must be options.buffer_bytes long.
  Transport(MPI_Comm comm, const Options& options, BufferPool* pool, WireStats* stats);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  // Room for one payload of `len` bytes to `dest` (whose next hop is `peer`),
  // in the run that peer's buffer ends with when the key matches, else in a
  // new run. When the buffer lacks room it leaves first, which may wait for a
  // send slot (receives keep completing meanwhile). Returns where to write the
  // payload; len is at most max_payload().
  std::uint8_t* append(int peer, std::uint32_t dest, std::uint32_t src, std::uint16_t handler,
                       std::uint32_t len) {
    Outbox& o = out_[static_cast<std::size_t>(peer)];
    if (o.buf != nullptr) [[likely]] {
      if (std::uint8_t* at = o.run.append(o.buf, &o.used, capacity_, dest, src, handler, len)) [[likely]]
        return at;
    }
    open_buffer(peer);
    return o.run.append(o.buf, &o.used, capacity_, dest, src, handler, len);
  }
  // Appends run h's `count` payloads (two-hop forwarding, routers), joining
  // peer's last run when the key matches; the buffer leaves when full.
  void append_run(int peer, const RunHeader& h, const std::uint8_t* payloads, std::uint32_t count) {
    Outbox& o = out_[static_cast<std::size_t>(peer)];
    std::uint32_t done =
        o.buf == nullptr ? 0 : o.run.append_payloads(o.buf, &o.used, capacity_, h, payloads, count);
    while (done < count) {
      open_buffer(peer);
      const std::uint32_t n = o.run.append_payloads(o.buf, &o.used, capacity_, h,
                                                    payloads + std::size_t{done} * h.len(), count - done);
      if (n == 0) [[unlikely]]  // an empty buffer took nothing: it never will
        too_large(h.len());
      done += n;
    }
  }
  // Completes sends and receives; true when anything completed.
  bool poll();
  // Sends every buffer older than age_ns (at now_ns); true when any left.
  bool flush_older_than(std::uint64_t now, std::uint64_t age_ns);
  // Sends every non-empty buffer (barriers); true when any left.
  bool flush_all();
  bool has_open_buffers() const noexcept { return !open_.empty(); }
  std::uint32_t in_flight() const noexcept { return in_flight_; }

  // The next received buffer (its owner returns it with recycle()); false when none.
  bool pop_received(Received* out) {
    if (received_.empty()) return false;
    *out = received_.front();
    received_.pop_front();
    return true;
  }
  void recycle(std::uint8_t* buf) noexcept { pool_->put(buf); }

  // Quiescence rounds: start one, then test it until it completes.
  void start_round(std::uint64_t sent, std::uint64_t handled);
  bool test_round(std::uint64_t* sent, std::uint64_t* handled);
  bool round_in_flight() const noexcept { return round_req_ != MPI_REQUEST_NULL; }

 private:
  struct Outbox {
    std::uint8_t* buf = nullptr;
    std::uint32_t used = 0;
    std::uint32_t open_index = 0;  // position in open_
    std::uint64_t since = 0;       // when its first run arrived
    RunCursor run;                 // the run the buffer ends with
  };
  enum class Why { Full, Timed, Forced };

  // Sends peer's buffer when it holds runs, then opens an empty one.
  void open_buffer(int peer);
  [[noreturn]] void too_large(std::uint32_t len) const;
  void flush(int peer, Why why);
  int acquire_send_slot(int peer);
  void post_receive(int k);

  Options options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::uint32_t capacity_;
  std::uint32_t max_outstanding_;
  std::uint64_t stall_ns_;
  BufferPool* pool_;
  WireStats* stats_;

  std::vector<Outbox> out_;
  std::vector<int> open_;  // peers whose buffer holds runs

  // requests_[0, R) are the posted receives, [R, R + S) the send slots.
  int recv_count_;
  std::vector<MPI_Request> requests_;
  std::vector<std::uint8_t*> request_buf_;
  std::vector<int> free_send_slots_;
  std::uint32_t in_flight_ = 0;
  std::vector<int> done_index_;
  std::vector<MPI_Status> done_status_;
  std::deque<Received> received_;

  MPI_Request round_req_ = MPI_REQUEST_NULL;
  std::uint64_t round_in_[2] = {0, 0};
  std::uint64_t round_out_[2] = {0, 0};
};

}  // namespace ferry::route::detail
