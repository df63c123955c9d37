#pragma once
// The agent's data path: moves descriptors between application memory and
// storage (the tier chain, through store::Storage) via a staging buffer,
// `queue_depth` batches at a time.
//
//   application memory ──copy lane──► staging slot ──checksum, put──► storage   (Write, push)
//   application memory ◄──copy lane── staging slot ◄──get, verify──── storage   (Read, pull)
//
// Where storage offers zero-copy (the dram tier on top), blocks skip the
// staging slot: they are copied straight into ranges it reserves and then
// adopts (push), or out of its memory in place (pull); that memory is pinned
// for DMA where there is a GPU. How a block is copied and hashed is the
// BlockCopier's business (block_copier.h).
//
// Where storage streams (the file tier on top: store/streaming.h), a host block
// larger than its stream_above() skips staging too: the tier reads it from the
// application piece by piece into a buffer that stays in cache, hashes and
// writes each piece, and reads it back the same way. Such a block may be larger
// than a staging slot.
//
// The staging buffer (--staging-mib; pinned where there is a GPU) is cut into
// queue_depth slots, one per copy thread, and each thread owns one copy lane (a
// CUDA stream). A batch gathers consecutive descriptors up to --chunk-kib, so many
// small blocks cross PCIe in one copy call.
//
// Errors (ferry/xfer/fault.h): a job carries one Fault; each descriptor gets a status,
// and the first failure's text is raised where it starts. Tier names and the
// per-descriptor texts are made at the API edge (session.cpp).

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ferry/xfer/agent.h"
#include "ferry/xfer/fault.h"
#include "ferry/xfer/types.h"
#include "xfer/agent/block_copier.h"
#include "xfer/agent/phases.h"
#include "xfer/agent/region.h"
#include "xfer/store/storage.h"

namespace ferry::xfer::agent {

struct MoverOptions {
  std::size_t staging_bytes = 256u << 20;
  // A batch closes at chunk_bytes or chunk_blocks, whichever comes first. 0
  // bytes: 16 MiB, or a staging slot if that is smaller. Large batches mean
  // fewer launches for large blocks; chunk_blocks keeps batches of small blocks
  // short enough that a lane's bookkeeping of one batch overlaps the next one's
  // copy (the sweep that chose both is in docs/bench/xfer.md).
  std::size_t chunk_bytes = 0;
  std::size_t chunk_blocks = 128;
  int queue_depth = 8;
  CopyOptions copy;  // pinned staging and CUDA copy lanes when copy.gpu
  // How long an idle lane polls the queue before it sleeps. Waking a sleeping
  // thread costs tens of microseconds per request and lane; an agent on its own
  // cores (--cpus) can afford to poll, as the reference's DPU cores do.
  unsigned lane_spin_us = 0;
  // How long a batch may wait on an application's own memory (memory reached
  // by copy calls: remote_memory.h) before its request is answered with an
  // error and that memory is dropped. 0: never. The lane itself stays in the
  // kernel until the memory answers; it cannot be taken back.
  std::chrono::milliseconds memory_timeout{0};
};

struct JobDesc {
  std::shared_ptr<ImportedRegion> region;  // keeps the mapping open while the job runs
  std::uint64_t offset = 0;
  std::uint64_t len = 0;
  std::string_view key;  // in Job::wire
};

struct Job {
  XferOp op = XferOp::Write;
  std::string wire;  // the transfer frame's body: the descriptors' keys point into it
  std::vector<JobDesc> descs;
  // Filled by the mover: each descriptor's status and size, and the index of
  // the tier it went to or came from (-1: none). The session turns these into
  // the reply's tier names and texts.
  std::vector<DescResult> results;
  std::vector<int> tiers;
  Fault fault;  // the job's first failure
  // Called once, from a mover thread, when every descriptor has a result.
  std::function<void(Job&)> on_done;
  // Called instead, from the mover's watchdog, when a batch waited on the
  // application's memory past memory_timeout: every descriptor failed with
  // `why`. The results are still being written then; it must not read them.
  std::function<void(const std::string& why)> on_abandoned;
  std::atomic<std::size_t> batches_left{0};
  // Set by whichever of on_done and on_abandoned runs; the other never does.
  std::atomic<bool> answered{false};
  bool foreign = false;  // a descriptor is memory reached by copy calls (set by submit)
  // Lanes busy with batches of such memory of this job's owner (its uid: the
  // session shares one counter per uid). One owner may hold all lanes but
  // one, so that memory that never answers cannot stall everyone. Null: the
  // mover's own counter.
  std::shared_ptr<std::atomic<int>> owner_lanes;
};

struct MoverStats {
  std::uint64_t bytes_written = 0, bytes_read = 0;
  std::uint64_t objects_written = 0, objects_read = 0;
  std::uint64_t failures = 0;
  std::uint64_t batches = 0;
};

class DataMover {
 public:
  // Throws ferry::Error (set-up) for bad options or when staging cannot be had.
  DataMover(const MoverOptions& options, store::Storage& storage);
  ~DataMover();  // finishes queued batches with Cancelled, then joins
  DataMover(const DataMover&) = delete;
  DataMover& operator=(const DataMover&) = delete;

  void submit(std::shared_ptr<Job> job);
  std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  // Batches waiting for a lane now (not those deferred for their owner's lanes).
  std::size_t queued() const noexcept { return queued_.load(std::memory_order_relaxed); }
  MoverStats stats() const;
  // Lanes held past memory_timeout by an application's memory that never
  // answered. Such a lane cannot be joined until it does.
  std::size_t stuck_lanes() const;
  std::string describe() const;
  // Time per phase of the request path (the session adds decode and answer).
  PhaseStats& phases() noexcept { return phases_; }

 private:
  struct Batch {
    std::shared_ptr<Job> job;
    std::size_t first = 0, count = 0;
    bool streamed = false;  // one object, streamed between the application and storage
    std::chrono::steady_clock::time_point deferred_at{};  // set while in deferred_
    std::chrono::steady_clock::time_point queued_at{};    // when submit() queued it (Phase::Queue)
  };
  // A batch from begin() to end(). Each lane has gpu::Lanes::kHashedSlots of
  // them and pipelines: it begins the next batch (reserve, start the copy
  // kernel) before it ends the one in flight (wait, put or verify), so the GPU
  // has the lane's next copy queued while the thread does the last one's
  // bookkeeping. Without that, lanes that share the GPU fairly finish their
  // kernels together and then all do bookkeeping together, with the GPU idle.
  struct Flight;
  void run(int lane);
  // Pops the next batch; waits for one only when `wait`. False when stopping
  // (or, without `wait`, when the queue is empty).
  bool take(Batch* b, bool wait);
  void begin(int lane, Flight& f);
  void end(int lane, Flight& f);
  void begin_write(int lane, Flight& f);
  void end_write(int lane, Flight& f);
  void begin_read(int lane, Flight& f);
  void end_read(int lane, Flight& f);
  void finish_batch(const std::shared_ptr<Job>& job);
  // The batches in progress on each lane that touch an application's own
  // memory, for the watchdog (a lane has up to kHashedSlots at once).
  struct Watch {
    std::shared_ptr<Job> job;
    std::chrono::steady_clock::time_point since;
  };
  struct LaneWatch {
    std::mutex mu;
    std::array<Watch, gpu::Lanes::kHashedSlots> flights;
  };
  void watch(int lane, int slot, const std::shared_ptr<Job>& job);
  void unwatch(int lane, int slot);
  // Watches (on) or stops watching the copy calls of a batch of a job that
  // touches an application's own memory: only they may wait on its pages.
  void watch_copy(int lane, Flight& f, bool on);
  // A lane for a batch of an application's own memory: false (the batch is
  // deferred until one of its owner's lanes comes back) when its owner holds
  // foreign_lanes_max lanes already.
  bool claim_owner_lane(Batch& b);
  void release_owner_lane(const std::shared_ptr<Job>& job);
  void watchdog();
  void abandon(const std::shared_ptr<Job>& job, int lane, std::chrono::steady_clock::duration waited);
  // Whether descriptor i moves by streaming: a host block larger than what
  // storage streams from.
  bool streams(const Job& job, std::size_t i) const noexcept;
  // Streams a streamed batch's object; false when storage would not take it
  // that way and it fits a staging slot (the batch then goes the staged way).
  bool stream(Flight& f);

  MoverOptions options_;
  store::Storage& storage_;
  bool pool_registered_ = false;
  std::size_t slot_bytes_ = 0;
  std::uint8_t* staging_ = nullptr;
  std::unique_ptr<BlockCopier> copier_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::deque<Batch> deferred_;  // waiting for a lane of their owner (claim_owner_lane)
  int foreign_lanes_max_ = 1;
  std::shared_ptr<std::atomic<int>> unowned_lanes_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<std::size_t> queued_{0};  // queue_.size(), for polling lanes (written under mu_)
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<LaneWatch>> watches_;
  std::thread watchdog_;

  PhaseStats phases_;
  std::atomic<std::uint64_t> bytes_written_{0}, bytes_read_{0}, objects_written_{0}, objects_read_{0},
      failures_{0}, batches_{0};
};

}  // namespace ferry::xfer::agent
