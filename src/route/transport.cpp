#include "route/transport.h"

#include <string>

#include "route/fatal.h"
#include "route/idle.h"

namespace ferry::route::detail {
namespace {
constexpr int kDataTag = 0x7e1;
}

Transport::Transport(MPI_Comm comm, const Options& options, BufferPool* pool, WireStats* stats)
    : options_(options),
      capacity_(options.buffer_bytes),
      max_outstanding_(options.max_outstanding),
      stall_ns_(std::uint64_t{options.stall_timeout_ms} * 1'000'000ull),
      pool_(pool),
      stats_(stats),
      recv_count_(static_cast<int>(options.recv_buffers)) {
  FERRY_MPI_CHECK(MPI_Comm_dup(comm, &comm_), "duplicating the transport's communicator");
  // Errors come back as codes, so fatal() can say which call failed and why.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  out_.resize(static_cast<std::size_t>(size_));
  open_.reserve(static_cast<std::size_t>(size_));
  const std::size_t n = static_cast<std::size_t>(recv_count_) + max_outstanding_;
  requests_.assign(n, MPI_REQUEST_NULL);
  request_buf_.assign(n, nullptr);
  done_index_.resize(n);
  done_status_.resize(n);
  for (int s = static_cast<int>(max_outstanding_) - 1; s >= 0; --s) free_send_slots_.push_back(s);
  stats_->capacity_bytes = capacity_;
  // A single rank never receives over MPI: its buffers to itself go straight to the queue.
  if (size_ > 1)
    for (int k = 0; k < recv_count_; ++k) post_receive(k);
}

Transport::~Transport() {
  for (int k = 0; k < recv_count_; ++k) {
    if (requests_[static_cast<std::size_t>(k)] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests_[static_cast<std::size_t>(k)]);
    MPI_Wait(&requests_[static_cast<std::size_t>(k)], MPI_STATUS_IGNORE);
  }
  // Sends still in flight were received (quiescence says so) and complete soon.
  MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  if (round_req_ != MPI_REQUEST_NULL) MPI_Wait(&round_req_, MPI_STATUS_IGNORE);
  for (std::uint8_t* b : request_buf_)
    if (b != nullptr) pool_->put(b);
  for (Outbox& o : out_)
    if (o.buf != nullptr) pool_->put(o.buf);
  for (const Received& r : received_) pool_->put(r.buf);
  MPI_Comm_free(&comm_);
}

void Transport::post_receive(int k) {
  std::uint8_t* buf = pool_->get();
  request_buf_[static_cast<std::size_t>(k)] = buf;
  FERRY_MPI_CHECK(MPI_Irecv(buf, static_cast<int>(capacity_), MPI_BYTE, MPI_ANY_SOURCE, kDataTag, comm_,
                            &requests_[static_cast<std::size_t>(k)]),
                  "posting a receive buffer");
}

void Transport::open_buffer(int peer) {
  Outbox& o = out_[static_cast<std::size_t>(peer)];
  if (o.buf != nullptr) flush(peer, Why::Full);
  o.buf = pool_->get();
  o.used = 0;
  o.run.reset();
  o.since = now_ns();
  o.open_index = static_cast<std::uint32_t>(open_.size());
  open_.push_back(peer);
}

void Transport::too_large(std::uint32_t len) const {
  fatal("rank " + std::to_string(rank_) + " of the transport: a " + std::to_string(len) +
        "-byte message does not fit a " + std::to_string(capacity_) +
        "-byte buffer (ranks disagree on buffer_bytes?)");
}

int Transport::acquire_send_slot(int peer) {
  if (free_send_slots_.empty()) {
    ++stats_->send_slot_waits;
    Backoff backoff = idle_backoff(options_);
    StallClock stall(stall_ns_);
    while (free_send_slots_.empty()) {
      if (poll()) {
        backoff.reset();
        stall.progressed();
        continue;
      }
      if (stall.stalled())
        fatal("rank " + std::to_string(rank_) + " of the transport: no buffer sent to rank " +
              std::to_string(peer) + " (or any other) completed for " + std::to_string(stall.seconds()) +
              " s with " + std::to_string(in_flight_) +
              " in flight; a receiver is dead or never calls progress()");
      backoff.idle();
    }
  }
  const int slot = free_send_slots_.back();
  free_send_slots_.pop_back();
  return slot;
}

void Transport::flush(int peer, Why why) {
  Outbox& o = out_[static_cast<std::size_t>(peer)];
  if (o.buf == nullptr) return;
  // Take the buffer off the open list first (swap-remove keeps it O(1)).
  const int last = open_.back();
  open_[o.open_index] = last;
  out_[static_cast<std::size_t>(last)].open_index = o.open_index;
  open_.pop_back();
  std::uint8_t* buf = o.buf;
  const std::uint32_t used = o.used;
  o.buf = nullptr;
  o.used = 0;
  o.run.reset();
  if (why == Why::Timed) ++stats_->timed_flushes;
  if (why == Why::Forced) ++stats_->forced_flushes;
  if (peer == rank_) {  // to ourselves: no MPI, straight to the receive queue
    received_.push_back({buf, used, rank_});
    return;
  }
  const int slot = acquire_send_slot(peer);
  const std::size_t k = static_cast<std::size_t>(recv_count_ + slot);
  request_buf_[k] = buf;
  FERRY_MPI_CHECK(MPI_Isend(buf, static_cast<int>(used), MPI_BYTE, peer, kDataTag, comm_, &requests_[k]),
                  "sending an aggregation buffer");
  ++in_flight_;
  if (in_flight_ > stats_->max_in_flight) stats_->max_in_flight = in_flight_;
  ++stats_->buffers_sent;
  stats_->bytes_sent += used;
}

bool Transport::poll() {
  int count = 0;
  FERRY_MPI_CHECK(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count,
                               done_index_.data(), done_status_.data()),
                  "testing sends and receives");
  if (count == MPI_UNDEFINED || count == 0) return false;
  for (int i = 0; i < count; ++i) {
    const int k = done_index_[static_cast<std::size_t>(i)];
    std::uint8_t* buf = request_buf_[static_cast<std::size_t>(k)];
    request_buf_[static_cast<std::size_t>(k)] = nullptr;
    if (k < recv_count_) {
      const MPI_Status& st = done_status_[static_cast<std::size_t>(i)];
      int bytes = 0;
      MPI_Get_count(&st, MPI_BYTE, &bytes);
      received_.push_back({buf, static_cast<std::uint32_t>(bytes), st.MPI_SOURCE});
      ++stats_->buffers_received;
      stats_->bytes_received += static_cast<std::uint64_t>(bytes);
      post_receive(k);
    } else {
      pool_->put(buf);
      free_send_slots_.push_back(k - recv_count_);
      --in_flight_;
    }
  }
  return true;
}

bool Transport::flush_older_than(std::uint64_t now, std::uint64_t age_ns) {
  bool any = false;
  // Backwards, so the swap-remove in flush() only moves entries already visited.
  for (std::size_t i = open_.size(); i-- > 0;) {
    const int peer = open_[i];
    if (now - out_[static_cast<std::size_t>(peer)].since >= age_ns) {
      flush(peer, Why::Timed);
      any = true;
    }
  }
  return any;
}

bool Transport::flush_all() {
  bool any = !open_.empty();
  while (!open_.empty()) flush(open_.back(), Why::Forced);
  return any;
}

void Transport::start_round(std::uint64_t sent, std::uint64_t handled) {
  round_in_[0] = sent;
  round_in_[1] = handled;
  FERRY_MPI_CHECK(MPI_Iallreduce(round_in_, round_out_, 2, MPI_UINT64_T, MPI_SUM, comm_, &round_req_),
                  "starting a quiescence round");
  ++stats_->rounds;
}

bool Transport::test_round(std::uint64_t* sent, std::uint64_t* handled) {
  int done = 0;
  FERRY_MPI_CHECK(MPI_Test(&round_req_, &done, MPI_STATUS_IGNORE), "testing a quiescence round");
  if (!done) return false;
  *sent = round_out_[0];
  *handled = round_out_[1];
  return true;
}

}  // namespace ferry::route::detail
