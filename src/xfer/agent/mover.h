#pragma once
// The agent's data path: moves descriptors between application memory and the
// tier chain through a staging buffer, `queue_depth` batches at a time.
//
//   application memory ──copy lane──► staging slot ──checksum, put──► tier chain   (Write, push)
//   application memory ◄──copy lane── staging slot ◄──get, verify──── tier chain   (Read, pull)
//
// When the top tier is DRAM, blocks skip the staging slot: they are copied
// straight into a pool range the tier reserves and then adopts (push), or out of
// the pool in place (pull); the pool is pinned for DMA where there is a GPU.
//
// The staging buffer (--staging-mib; pinned where there is a GPU) is cut into
// queue_depth slots, one per copy thread, and each thread owns one copy lane (a
// CUDA stream). A batch gathers consecutive descriptors up to --chunk-kib, so many
// small blocks cross PCIe in one cudaMemcpyBatchAsync call (--copy batch) or one
// launch of the copy kernel (--copy kernel, which also computes the checksums on
// the GPU); device memory goes through the lane, host (memfd) memory through memcpy.

#include <atomic>
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
#include "ferry/xfer/types.h"
#include "xfer/agent/phases.h"
#include "xfer/agent/region.h"
#include "xfer/gpu/gpu.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::agent {

struct MoverOptions {
  std::size_t staging_bytes = 256u << 20;
  // A batch closes at chunk_bytes or chunk_blocks, whichever comes first. 0
  // bytes: 16 MiB, or a staging slot if that is smaller. Measured on an H100
  // (docs/bench/xfer.md): 16 MiB batches move 1 MiB blocks ~5%
  // faster than 4 MiB ones (fewer launches), while 64 KiB blocks lose ~2 GB/s
  // in 16 MiB (256-block) batches against 4-8 MiB ones (64-128 blocks), short
  // enough that a lane's bookkeeping of one batch overlaps the next one's copy.
  std::size_t chunk_bytes = 0;
  std::size_t chunk_blocks = 128;
  int queue_depth = 8;
  bool gpu = false;      // pinned staging and CUDA copy lanes
  int device = 0;
  gpu::CopyMethod copy = gpu::CopyMethod::Auto;  // --copy auto | batch | loop | kernel
  // --copy auto: blocks below this go by the copy kernel, the rest by batch.
  std::size_t kernel_below = 64u << 20;
  std::size_t kernel_below_pull = 64u << 20;  // the same for pulls (reads)
  // --copy auto, blocks the kernel hashes: from this size on (0: never) the copy
  // engines copy them and the kernel hashes them in device memory.
  std::size_t engines_from = 1u << 20;
  // How long an idle lane polls the queue before it sleeps. Waking a sleeping
  // thread costs tens of microseconds per request and lane; an agent on its own
  // cores (--cpus) can afford to poll, as the reference's DPU cores do.
  unsigned lane_spin_us = 0;
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
  std::vector<DescResult> results;  // filled by the mover
  // Called once, from a mover thread, when every descriptor has a result.
  std::function<void(Job&)> on_done;
  std::atomic<std::size_t> batches_left{0};
};

struct MoverStats {
  std::uint64_t bytes_written = 0, bytes_read = 0;
  std::uint64_t objects_written = 0, objects_read = 0;
  std::uint64_t failures = 0;
  std::uint64_t batches = 0;
};

class DataMover {
 public:
  DataMover(const MoverOptions& options, store::TierChain& chain);
  ~DataMover();  // finishes queued batches with Cancelled, then joins
  DataMover(const DataMover&) = delete;
  DataMover& operator=(const DataMover&) = delete;

  void submit(std::shared_ptr<Job> job);
  std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  MoverStats stats() const;
  std::string describe() const;
  // Time per phase of the request path (the session adds decode and answer).
  PhaseStats& phases() noexcept { return phases_; }

 private:
  struct Batch {
    std::shared_ptr<Job> job;
    std::size_t first = 0, count = 0;
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
  // A push's copy into f.host[k] and the checksum f.sums[k] of each block by the
  // copy engines, in waves, the CPU hashing behind them. False with f.error when
  // a copy fails.
  bool push_by_engine(int lane, Flight& f);
  // Whether a block of `len` bytes moving by `op` goes by the copy kernel. A batch holds blocks
  // of one method only (submit() cuts it where the method changes).
  bool by_kernel(XferOp op, std::size_t len) const noexcept {
    const std::size_t below = op == XferOp::Write ? options_.kernel_below : options_.kernel_below_pull;
    return lanes_ != nullptr &&
           (options_.copy == gpu::CopyMethod::Kernel || (options_.copy == gpu::CopyMethod::Auto && len < below));
  }
  // How a block that by_kernel() takes moves (a batch holds one way only).
  gpu::HashedCopy hashed_copy(std::size_t len) const noexcept {
    return options_.copy == gpu::CopyMethod::Auto && options_.engines_from > 0 && len >= options_.engines_from
               ? gpu::HashedCopy::Engines
               : gpu::HashedCopy::Fused;
  }
  void finish_batch(const std::shared_ptr<Job>& job);
  // The chain's tier names, built once: a result names its tier per block.
  const std::string& tier_name(int tier) const noexcept {
    static const std::string kNone;
    return tier >= 0 ? tier_names_[static_cast<std::size_t>(tier)] : kNone;
  }

  MoverOptions options_;
  store::TierChain& chain_;
  store::DramTier* dram_ = nullptr;  // the chain's top tier, when it is DRAM
  std::vector<std::string> tier_names_;
  bool pool_registered_ = false;
  std::size_t slot_bytes_ = 0;
  std::uint8_t* staging_ = nullptr;
  std::unique_ptr<gpu::Lanes> lanes_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::atomic<std::size_t> queued_{0};  // queue_.size(), for polling lanes (written under mu_)
  bool stopping_ = false;
  std::vector<std::thread> threads_;

  PhaseStats phases_;
  std::atomic<std::uint64_t> bytes_written_{0}, bytes_read_{0}, objects_written_{0}, objects_read_{0},
      failures_{0}, batches_{0};
};

}  // namespace ferry::xfer::agent
