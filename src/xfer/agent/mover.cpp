#include "xfer/agent/mover.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "core/log.h"
#include "ferry/core/detail/backoff.h"
#include "ferry/core/status.h"
#include "xfer/checksum/leaf_segments.h"
#include "xfer/checksum/checksum.h"
#include "xfer/checksum/xxh3_parts.h"

namespace ferry::xfer::agent {
namespace {

// Staged objects start on 4 KiB boundaries: O_DIRECT file tiers and the copy
// engines both prefer aligned buffers.
constexpr std::size_t kStageAlign = 4096;
std::size_t align_up(std::size_t n) { return (n + kStageAlign - 1) & ~(kStageAlign - 1); }

// The unit of pipelining: a block is copied, and hashed, in pieces of this size.
constexpr std::size_t kPieceBytes = 1u << 20;

}  // namespace

DataMover::DataMover(const MoverOptions& options, store::TierChain& chain) : options_(options), chain_(chain) {
  // A DRAM tier on top is the fast path: blocks go straight into (and out of) its pool.
  if (chain_.size() > 0) dram_ = dynamic_cast<store::DramTier*>(&chain_.tier(0));
  for (std::size_t i = 0; i < chain_.size(); ++i) tier_names_.push_back(chain_.tier(i).describe());
  if (dram_ != nullptr && options_.gpu) {
    const auto pool = dram_->pool();
    log::app().info("pinning the dram tier's {} MiB for DMA (the GPU copies straight into it)", pool.size() >> 20);
    gpu::register_host(pool.data(), pool.size());
    pool_registered_ = true;
  }
  if (options_.queue_depth < 1 || options_.queue_depth > 256) throw Error("--queue-depth must be in 1..256");
  slot_bytes_ = (options_.staging_bytes / static_cast<std::size_t>(options_.queue_depth)) & ~(kStageAlign - 1);
  if (slot_bytes_ < kStageAlign)
    throw Error("--staging-mib is too small for --queue-depth " + std::to_string(options_.queue_depth));
  if (options_.chunk_bytes == 0) options_.chunk_bytes = std::min<std::size_t>(16u << 20, slot_bytes_);
  if (options_.chunk_bytes > slot_bytes_)
    throw Error("--chunk-kib " + std::to_string(options_.chunk_bytes >> 10) + " exceeds a staging slot (" +
                std::to_string(slot_bytes_ >> 10) + " KiB = --staging-mib / --queue-depth)");
  const std::size_t total = slot_bytes_ * static_cast<std::size_t>(options_.queue_depth);
  if (options_.gpu) {
    staging_ = static_cast<std::uint8_t*>(gpu::alloc_pinned(total));
    lanes_ = std::make_unique<gpu::Lanes>(options_.device, options_.queue_depth, options_.copy, slot_bytes_,
                                          xxh3_default_secret());
  } else {
    staging_ = static_cast<std::uint8_t*>(std::aligned_alloc(kStageAlign, total));
    if (staging_ == nullptr) throw Error("cannot allocate " + std::to_string(total >> 20) + " MiB of staging");
  }
  for (int lane = 0; lane < options_.queue_depth; ++lane) threads_.emplace_back([this, lane] { run(lane); });
}

DataMover::~DataMover() {
  std::deque<Batch> left;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    left.swap(queue_);
    queued_.store(0, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  for (auto& b : left) {
    for (std::size_t i = b.first; i < b.first + b.count; ++i)
      b.job->results[i] = {XferStatus::Cancelled, 0, "", "the agent is shutting down"};
    finish_batch(b.job);
  }
  lanes_.reset();
  if (pool_registered_) gpu::unregister_host(dram_->pool().data());
  if (options_.gpu)
    gpu::free_pinned(staging_);
  else
    std::free(staging_);
}

std::string DataMover::describe() const {
  return std::to_string(options_.queue_depth) + " lanes x " + std::to_string(slot_bytes_ >> 10) +
         " KiB staging (" + (options_.gpu ? "pinned, CUDA " : "host, memcpy") +
         (options_.gpu ? (options_.copy == gpu::CopyMethod::Batch  ? "cudaMemcpyBatchAsync"
                          : options_.copy == gpu::CopyMethod::Loop ? "cudaMemcpyAsync loop"
                          : options_.copy == gpu::CopyMethod::Kernel
                              ? "copy kernel with XXH3 on the GPU"
                              : "copy kernel with XXH3 on the GPU below " +
                                    std::to_string(options_.kernel_below >> 10) + " KiB (pushes) / " +
                                    std::to_string(options_.kernel_below_pull >> 10) +
                                    " KiB (pulls) blocks, cudaMemcpyBatchAsync at and above" +
                                    (options_.engines_from > 0
                                         ? "; from " + std::to_string(options_.engines_from >> 10) +
                                               " KiB on, cudaMemcpyBatchAsync copies and the kernel only hashes"
                                         : std::string()))
                       : "") +
         "), batches up to " + std::to_string(options_.chunk_bytes >> 10) + " KiB and " +
         std::to_string(options_.chunk_blocks) + " blocks" +
         (options_.lane_spin_us > 0 ? ", idle lanes poll " + std::to_string(options_.lane_spin_us) + " us" : "");
}

void DataMover::submit(std::shared_ptr<Job> job) {
  job->results.assign(job->descs.size(), DescResult{});
  std::vector<Batch> batches;
  std::size_t i = 0;
  while (i < job->descs.size()) {
    if (job->descs[i].len > slot_bytes_) {  // cannot be staged whole
      job->results[i] = {XferStatus::TooLarge, 0, "",
                         "'" + std::string(job->descs[i].key) + "': " + std::to_string(job->descs[i].len) +
                             " bytes exceed the agent's staging slot of " + std::to_string(slot_bytes_) +
                             " bytes (raise --staging-mib or lower --queue-depth)"};
      ++i;
      continue;
    }
    Batch b{job, i, 0};
    std::size_t bytes = 0;
    while (i < job->descs.size() && job->descs[i].len <= slot_bytes_) {
      const std::size_t need = align_up(job->descs[i].len);
      if (b.count > 0 && (bytes + need > options_.chunk_bytes || bytes + need > slot_bytes_ ||
                          b.count == options_.chunk_blocks))
        break;
      if (b.count > 0 && (by_kernel(job->op, job->descs[i].len) != by_kernel(job->op, job->descs[b.first].len) ||
                          hashed_copy(job->descs[i].len) != hashed_copy(job->descs[b.first].len)))
        break;
      bytes += need;
      ++b.count;
      ++i;
    }
    batches.push_back(b);
  }
  if (batches.empty()) {
    job->on_done(*job);
    return;
  }
  job->batches_left.store(batches.size());
  {
    std::lock_guard lk(mu_);
    for (auto& b : batches) queue_.push_back(std::move(b));
    queued_.store(queue_.size(), std::memory_order_release);
  }
  cv_.notify_all();
}

// One batch's state between begin() and end() (see mover.h).
struct DataMover::Flight {
  Batch batch;
  int slot = 0;          // the lane's copy-kernel buffer set (gpu::Lanes::start_hashed)
  bool kernel = false;   // device blocks go by the copy kernel
  bool started = false;  // start_hashed succeeded: end() collects it
  bool staged = false;   // a block uses the lane's staging slot (there is one per lane)
  bool ok = true;
  std::string error;
  std::vector<std::uint8_t*> host;  // per block: its bytes in host memory (pool range or staging)
  std::vector<std::uint64_t> sums;  // push: each block's checksum; pull: the stored one
  std::vector<gpu::Segment> segs;   // the device blocks' copies (by the kernel: their leaves)
  std::vector<std::size_t> seg_of;  // block -> its (first) segment, or kNoSeg
  std::vector<std::uint64_t> gpu_sums;
  std::vector<std::uint8_t> hashed;
  // push
  std::vector<MutableByteView> reserved;
  std::vector<store::PutItem> items;
  // pull
  std::vector<bool> borrowed;                     // found in the dram tier, read in place
  std::vector<std::shared_ptr<const void>> holds;  // keep the borrowed bytes until the copy is done
  std::vector<store::GetItem> gets;               // the rest, read from the chain into staging
  std::vector<std::size_t> got;                   // gets[i] is block got[i]

  static constexpr std::size_t kNoSeg = ~std::size_t{0};
  // Only a kernel copy with no block in the staging slot may stay in flight while
  // the lane begins another batch (which may use the slot).
  bool may_stay_in_flight() const { return started && !staged; }
  std::size_t first() const { return batch.first; }
  std::size_t count() const { return batch.count; }
};

bool DataMover::take(Batch* b, bool wait) {
  if (wait && options_.lane_spin_us > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(options_.lane_spin_us);
    for (std::uint32_t i = 1; queued_.load(std::memory_order_acquire) == 0; ++i) {
      if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
      cpu_pause();
    }
  }
  std::unique_lock lk(mu_);
  if (wait) cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
  if (stopping_ || queue_.empty()) return false;
  *b = std::move(queue_.front());
  queue_.pop_front();
  queued_.store(queue_.size(), std::memory_order_release);
  return true;
}

void DataMover::run(int lane) {
  std::array<Flight, gpu::Lanes::kHashedSlots> flights;
  for (std::size_t i = 0; i < flights.size(); ++i) flights[i].slot = static_cast<int>(i);
  std::size_t next = 0;
  Flight* in_flight = nullptr;
  const auto complete = [&](Flight& f) {
    end(lane, f);
    for (std::size_t i = f.first(); i < f.first() + f.count(); ++i)
      if (is_error(f.batch.job->results[i].status)) failures_.fetch_add(1, std::memory_order_relaxed);
    finish_batch(f.batch.job);
    f.batch.job.reset();
  };
  for (;;) {
    Batch b;
    // With a batch in flight, take another only if one is waiting: else end it now.
    const bool got = take(&b, in_flight == nullptr);
    if (!got && in_flight == nullptr) return;  // stopping
    Flight* begun = nullptr;
    if (got) {
      begun = &flights[next];
      next = (next + 1) % flights.size();
      begun->batch = std::move(b);
      begin(lane, *begun);
    }
    if (in_flight != nullptr) complete(*std::exchange(in_flight, nullptr));
    if (begun != nullptr) {
      if (begun->may_stay_in_flight())
        in_flight = begun;
      else
        complete(*begun);
    }
  }
}

void DataMover::finish_batch(const std::shared_ptr<Job>& job) {
  if (job->batches_left.fetch_sub(1) == 1) job->on_done(*job);
}

void DataMover::begin(int lane, Flight& f) {
  batches_.fetch_add(1, std::memory_order_relaxed);
  f.started = f.staged = false;
  f.ok = true;
  f.error.clear();
  if (f.batch.job->op == XferOp::Write)
    begin_write(lane, f);
  else
    begin_read(lane, f);
}

void DataMover::end(int lane, Flight& f) {
  if (f.batch.job->op == XferOp::Write)
    end_write(lane, f);
  else
    end_read(lane, f);
}

void DataMover::begin_write(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  std::uint8_t* slot = staging_ + static_cast<std::size_t>(lane) * slot_bytes_;
  // Each block lands where it will be stored when the top tier is DRAM and has
  // room (a reserved pool range the tier then adopts: no second copy), else in
  // this lane's staging slot.
  PhaseTimer reserve_time(phases_, Phase::Reserve);
  // The whole batch's ranges under one lock of the tier's allocator.
  f.reserved.assign(count, MutableByteView{nullptr, 0});
  if (dram_ != nullptr) {
    thread_local std::vector<std::uint64_t> sizes;
    sizes.resize(count);
    for (std::size_t k = 0; k < count; ++k) sizes[k] = job.descs[first + k].len;
    dram_->reserve(sizes, f.reserved);
  }
  f.host.clear();
  std::size_t off = 0;
  for (std::size_t k = 0; k < count; ++k) {
    if (f.reserved[k].data != nullptr) {
      f.host.push_back(f.reserved[k].data);
    } else {
      f.host.push_back(slot + off);
      off += align_up(job.descs[first + k].len);
      f.staged = true;
    }
  }
  reserve_time.stop();

  f.sums.assign(count, 0);
  f.kernel = by_kernel(XferOp::Write, job.descs[first].len);
  if (!f.kernel) return;  // the copy engines' path runs whole in end_write
  // The kernel hashes each device block leaf by leaf, while it copies it or, from
  // --engines-from on, after the copy engines have (hashed_copy()); the CPU
  // copies and hashes only host (memfd) blocks and hashes what the kernel leaves
  // (a leaf of 240 bytes or less, unaligned: see end_write).
  PhaseTimer copy_time(phases_, Phase::Copy);
  f.segs.clear();
  f.seg_of.assign(count, Flight::kNoSeg);
  for (std::size_t k = 0; k < count; ++k) {
    const JobDesc& d = job.descs[first + k];
    const std::uint8_t* app = d.region->base() + d.offset;
    if (d.region->on_device() && d.len > 0) {
      f.seg_of[k] = f.segs.size();
      append_leaves({f.host[k], app, d.len}, &f.segs);
    } else {
      std::memcpy(f.host[k], app, d.len);
      f.sums[k] = checksum({f.host[k], d.len});
    }
  }
  f.ok = f.started = lanes_->start_hashed(lane, f.slot, f.segs, false, hashed_copy(job.descs[first].len), &f.error);
}

void DataMover::end_write(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  PhaseTimer copy_time(phases_, Phase::Copy);
  if (!f.kernel) {
    f.ok = push_by_engine(lane, f);
  } else if (f.started) {
    f.gpu_sums.resize(f.segs.size());
    f.hashed.resize(f.segs.size());
    f.ok = lanes_->collect_hashed(lane, f.slot, f.gpu_sums.data(), f.hashed.data(), &f.error);
    for (std::size_t k = 0; f.ok && k < count; ++k) {
      const std::size_t i = f.seg_of[k];
      if (i == Flight::kNoSeg) continue;
      const std::uint64_t len = job.descs[first + k].len;
      const auto sum = checksum_from_leaves(f.gpu_sums, f.hashed, i, len);
      f.sums[k] = sum ? *sum : checksum({f.host[k], len});
    }
  }
  copy_time.stop();
  PhaseTimer put_time(phases_, Phase::Put);

  f.items.clear();
  if (!f.ok) {
    for (std::size_t k = 0; k < count; ++k)
      job.results[first + k] = {XferStatus::IoError, 0, "", "'" + std::string(job.descs[first + k].key) + "': " + f.error};
  } else {
    for (std::size_t k = 0; k < count; ++k) {
      store::PutItem& it = f.items.emplace_back();
      it.key = job.descs[first + k].key;
      it.data = ByteView{f.host[k], job.descs[first + k].len};
      it.checksum = f.sums[k];
    }
    chain_.put(f.items);
    for (std::size_t k = 0; k < count; ++k) {
      store::PutItem& it = f.items[k];
      DescResult& r = job.results[first + k];
      r.status = it.status;
      r.error = std::move(it.error);
      if (it.status == XferStatus::Ok) {
        r.size = it.data.size;
        r.tier = tier_name(it.tier);
        bytes_written_.fetch_add(it.data.size, std::memory_order_relaxed);
        objects_written_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  if (dram_ != nullptr) {
    // Only ranges the tier did not adopt: an adopted one may already be freed
    // (a later duplicate key, another lane's overwrite, eviction) and reserved
    // again by another lane, whose reservation an unreserve by offset would free.
    for (std::size_t k = 0; k < f.items.size(); ++k)
      if (f.items[k].adopted) f.reserved[k] = MutableByteView{nullptr, 0};
    dram_->unreserve(f.reserved);
  }
}

bool DataMover::push_by_engine(int lane, Flight& f) {
  const Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  // Copy in waves of pieces, and checksum each piece as soon as its wave has
  // landed, while the later waves are still crossing PCIe: a large block is
  // hashed behind its own DMA instead of after it (the reference's chunked,
  // pipelined DMA).
  struct Piece {
    std::size_t k, offset, len, wave;
  };
  constexpr std::size_t kNoWave = ~std::size_t{0};
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<gpu::Segment> segs;
  thread_local std::vector<std::uint64_t> tickets;
  pieces.clear();
  segs.clear();
  tickets.clear();
  std::size_t batch_bytes = 0;
  for (std::size_t k = 0; k < count; ++k) batch_bytes += job.descs[first + k].len;
  const std::size_t wave_target = std::max(kPieceBytes, batch_bytes / (gpu::Lanes::kMarks / 2));
  std::size_t wave_bytes = 0;
  bool ok = true;
  std::string* error = &f.error;
  const auto close_wave = [&] {
    if (segs.empty()) return;
    ok = ok && lanes_->start(lane, segs, false, error);
    tickets.push_back(lanes_->mark(lane));
    segs.clear();
    wave_bytes = 0;
  };
  for (std::size_t k = 0; k < count; ++k) {
    const JobDesc& d = job.descs[first + k];
    const std::uint8_t* app = d.region->base() + d.offset;
    for (std::size_t at = 0; at < d.len; at += kPieceBytes) {
      const std::size_t len = std::min<std::size_t>(kPieceBytes, d.len - at);
      if (d.region->on_device()) {
        segs.push_back({f.host[k] + at, app + at, len});
        pieces.push_back({k, at, len, tickets.size()});
        if ((wave_bytes += len) >= wave_target) close_wave();
      } else {
        std::memcpy(f.host[k] + at, app + at, len);
        pieces.push_back({k, at, len, kNoWave});
      }
    }
  }
  close_wave();

  std::unique_ptr<ChecksumStream> stream;
  std::size_t waited = 0;
  for (const Piece& p : pieces) {
    if (!ok) break;
    if (p.wave != kNoWave && p.wave >= waited) {
      ok = lanes_->wait(lane, tickets[p.wave], error);
      waited = p.wave + 1;
      if (!ok) break;
    }
    const std::size_t len = job.descs[first + p.k].len;
    const ByteView bytes{f.host[p.k] + p.offset, p.len};
    if (p.len == len) {
      f.sums[p.k] = checksum(bytes);
      continue;
    }
    if (p.offset == 0) stream = std::make_unique<ChecksumStream>();
    stream->update(bytes);
    if (p.offset + p.len == len) f.sums[p.k] = stream->digest();
  }
  if (!tickets.empty()) {  // drain the lane even after a failure: the next batch reuses its slot
    std::string drain_error;
    if (!lanes_->finish(lane, &drain_error) && ok) {
      ok = false;
      *error = drain_error;
    }
  }
  return ok;
}

void DataMover::begin_read(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  std::uint8_t* slot = staging_ + static_cast<std::size_t>(lane) * slot_bytes_;
  // Objects in the DRAM tier are copied out of its pool in place, and verified
  // while (or, by the kernel, as) the copy runs; the rest are read (and verified)
  // from the chain into this lane's staging slot first.
  f.host.assign(count, nullptr);
  f.sums.assign(count, 0);
  f.borrowed.assign(count, false);
  f.holds.clear();
  f.gets.clear();
  f.got.clear();
  PhaseTimer lookup_time(phases_, Phase::Lookup);
  const std::string& dram_name = tier_name(dram_ != nullptr ? 0 : -1);
  // The whole batch's lookups under one lock of the tier's index.
  thread_local std::vector<std::string_view> keys;
  thread_local std::vector<std::optional<store::DramTier::Borrowed>> found;
  found.assign(count, std::nullopt);
  if (dram_ != nullptr) {
    keys.resize(count);
    for (std::size_t k = 0; k < count; ++k) keys[k] = job.descs[first + k].key;
    dram_->borrow(keys, found);
  }
  std::size_t off = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const JobDesc& d = job.descs[first + k];
    DescResult& r = job.results[first + k];
    if (auto& b = found[k]) {
      r.size = b->bytes.size;
      r.tier = dram_name;
      if (b->bytes.size > d.len) {
        r.status = XferStatus::TooLarge;
        r.error = "'" + std::string(d.key) + "' has " + std::to_string(b->bytes.size) + " bytes, the buffer holds " +
                  std::to_string(d.len);
      } else {
        r.status = XferStatus::Ok;
        f.host[k] = const_cast<std::uint8_t*>(b->bytes.data);
        f.sums[k] = b->checksum;
        f.borrowed[k] = true;
        f.holds.push_back(std::move(b->hold));  // the bytes stay valid until the copy is done
      }
      continue;
    }
    f.host[k] = slot + off;
    f.staged = true;
    f.got.push_back(k);
    store::GetItem& it = f.gets.emplace_back();
    it.key = d.key;
    it.out = MutableByteView{slot + off, d.len};
    off += align_up(d.len);
  }
  chain_.get(f.gets);
  for (std::size_t i = 0; i < f.got.size(); ++i) {
    store::GetItem& it = f.gets[i];
    DescResult& r = job.results[first + f.got[i]];
    r.status = it.status;
    r.error = std::move(it.error);
    // TooLarge carries the object's size too, so that the application can read
    // it again into a block that fits (docs/xfer-tiers.md, section 7).
    if (it.status == XferStatus::Ok || it.status == XferStatus::TooLarge) {
      r.size = it.size;
      r.tier = tier_name(it.tier);
    }
  }
  lookup_time.stop();

  PhaseTimer copy_time(phases_, Phase::Copy);
  // The copy kernel hashes what it copies (leaf by leaf); by the copy engines,
  // end_read starts the DMA and verifies on the CPU while it reads the pool.
  f.kernel = by_kernel(XferOp::Read, job.descs[first].len);
  f.segs.clear();
  f.seg_of.assign(count, Flight::kNoSeg);
  for (std::size_t k = 0; k < count; ++k) {
    const DescResult& r = job.results[first + k];
    if (r.status != XferStatus::Ok || r.size == 0) continue;
    const JobDesc& d = job.descs[first + k];
    std::uint8_t* app = d.region->base() + d.offset;
    if (d.region->on_device()) {
      f.seg_of[k] = f.segs.size();
      if (f.kernel)
        append_leaves({app, f.host[k], r.size}, &f.segs);
      else
        f.segs.push_back({app, f.host[k], r.size});
    } else {
      std::memcpy(app, f.host[k], r.size);
    }
  }
  if (f.kernel)
    f.ok = f.started = lanes_->start_hashed(lane, f.slot, f.segs, true, hashed_copy(job.descs[first].len), &f.error);
}

void DataMover::end_read(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  PhaseTimer copy_time(phases_, Phase::Copy);
  f.gpu_sums.assign(f.segs.size(), 0);
  f.hashed.assign(f.segs.size(), 0);
  if (f.started)
    f.ok = lanes_->collect_hashed(lane, f.slot, f.gpu_sums.data(), f.hashed.data(), &f.error);
  else if (!f.kernel && lanes_ != nullptr && !f.segs.empty())
    f.ok = lanes_->start(lane, f.segs, true, &f.error);
  copy_time.stop();
  PhaseTimer verify_time(phases_, Phase::Verify);
  const std::string& dram_name = tier_name(dram_ != nullptr ? 0 : -1);
  // A mismatch fails the descriptor: the application must not use what landed in its buffer.
  for (std::size_t k = 0; f.ok && k < count; ++k) {
    if (!f.borrowed[k]) continue;
    DescResult& r = job.results[first + k];
    const std::size_t i = f.seg_of[k];
    std::optional<std::uint64_t> by_gpu;
    if (i != Flight::kNoSeg) by_gpu = checksum_from_leaves(f.gpu_sums, f.hashed, i, r.size);
    const std::uint64_t sum = by_gpu ? *by_gpu : checksum({f.host[k], r.size});
    if (sum != f.sums[k]) {
      r.status = XferStatus::ChecksumMismatch;
      r.error = "'" + std::string(job.descs[first + k].key) + "' fails its checksum in " + dram_name + " (stored " +
                checksum_hex(f.sums[k]) + ", computed " + checksum_hex(sum) + ")";
    }
  }
  if (!f.kernel && !f.segs.empty()) {  // drain the engines' DMA even after a failure
    std::string drain_error;
    if (!lanes_->finish(lane, &drain_error) && f.ok) {
      f.ok = false;
      f.error = drain_error;
    }
  }
  f.holds.clear();  // the copies are done: the borrowed bytes may go
  if (!f.ok) {
    for (std::size_t k = 0; k < count; ++k) {
      DescResult& r = job.results[first + k];
      if (r.status == XferStatus::Ok) r = {XferStatus::IoError, 0, "", "'" + std::string(job.descs[first + k].key) + "': " + f.error};
    }
    return;
  }
  for (std::size_t k = 0; k < count; ++k) {
    const DescResult& r = job.results[first + k];
    if (r.status != XferStatus::Ok) continue;
    bytes_read_.fetch_add(r.size, std::memory_order_relaxed);
    objects_read_.fetch_add(1, std::memory_order_relaxed);
  }
}

MoverStats DataMover::stats() const {
  MoverStats s;
  s.bytes_written = bytes_written_.load();
  s.bytes_read = bytes_read_.load();
  s.objects_written = objects_written_.load();
  s.objects_read = objects_read_.load();
  s.failures = failures_.load();
  s.batches = batches_.load();
  return s;
}

}  // namespace ferry::xfer::agent
