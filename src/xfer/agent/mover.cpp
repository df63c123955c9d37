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
#include "ferry/xfer/checksum.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::agent {
namespace {

// Staged objects start on 4 KiB boundaries: O_DIRECT file tiers and the copy
// engines both prefer aligned buffers.
constexpr std::size_t kStageAlign = 4096;
std::size_t align_up(std::size_t n) { return (n + kStageAlign - 1) & ~(kStageAlign - 1); }

}  // namespace

DataMover::DataMover(const MoverOptions& options, store::Storage& storage) : options_(options), storage_(storage) {
  // Storage that offers zero-copy (a dram tier on top) is the fast path: blocks
  // go straight into (and out of) its memory, pinned once for DMA.
  const auto dma = storage_.dma_memory();
  if (!dma.empty() && options_.copy.gpu) {
    log::app().info("pinning the dram tier's {} MiB for DMA (the GPU copies straight into it)", dma.size() >> 20);
    gpu::register_host(dma.data(), dma.size());
    pool_registered_ = true;
  }
  if (options_.queue_depth < 1 || options_.queue_depth > 256)
    throw Error("AgentServiceOptions::queue_depth must be in 1..256");
  slot_bytes_ = (options_.staging_bytes / static_cast<std::size_t>(options_.queue_depth)) & ~(kStageAlign - 1);
  if (slot_bytes_ < kStageAlign)
    throw Error("AgentServiceOptions::staging_mib is too small for AgentServiceOptions::queue_depth " +
                std::to_string(options_.queue_depth));
  if (options_.chunk_bytes == 0) options_.chunk_bytes = std::min<std::size_t>(16u << 20, slot_bytes_);
  if (options_.chunk_bytes > slot_bytes_)
    throw Error("AgentServiceOptions::chunk_kib " + std::to_string(options_.chunk_bytes >> 10) +
                " exceeds a staging slot (" + std::to_string(slot_bytes_ >> 10) +
                " KiB = AgentServiceOptions::staging_mib / AgentServiceOptions::queue_depth)");
  const std::size_t total = slot_bytes_ * static_cast<std::size_t>(options_.queue_depth);
  if (options_.copy.gpu) {
    staging_ = static_cast<std::uint8_t*>(gpu::alloc_pinned(total));
  } else {
    staging_ = static_cast<std::uint8_t*>(std::aligned_alloc(kStageAlign, total));
    if (staging_ == nullptr) throw Error("cannot allocate " + std::to_string(total >> 20) + " MiB of staging");
  }
  copier_ = std::make_unique<BlockCopier>(options_.copy, options_.queue_depth, slot_bytes_);
  foreign_lanes_max_ = std::max(1, options_.queue_depth - 1);
  for (int lane = 0; lane < options_.queue_depth; ++lane) watches_.push_back(std::make_unique<LaneWatch>());
  for (int lane = 0; lane < options_.queue_depth; ++lane) threads_.emplace_back([this, lane] { run(lane); });
  if (options_.memory_timeout.count() > 0) watchdog_ = std::thread([this] { watchdog(); });
}

DataMover::~DataMover() {
  std::deque<Batch> left;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    left.swap(queue_);
    for (auto& b : deferred_) left.push_back(std::move(b));
    deferred_.clear();
    queued_.store(0, std::memory_order_release);
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& t : threads_) t.join();
  for (auto& b : left) {
    const XferStatus cancelled = b.job->fault.raise(XferStatus::Cancelled, "the agent is shutting down");
    for (std::size_t i = b.first; i < b.first + b.count; ++i) b.job->results[i] = {cancelled, 0, "", ""};
    finish_batch(b.job);
  }
  copier_.reset();
  if (pool_registered_) gpu::unregister_host(storage_.dma_memory().data());
  if (options_.copy.gpu)
    gpu::free_pinned(staging_);
  else
    std::free(staging_);
}

std::string DataMover::describe() const {
  return std::to_string(options_.queue_depth) + " lanes x " + std::to_string(slot_bytes_ >> 10) +
         " KiB staging (" + copier_->describe() + "), batches up to " + std::to_string(options_.chunk_bytes >> 10) +
         " KiB and " + std::to_string(options_.chunk_blocks) + " blocks" +
         (options_.lane_spin_us > 0 ? ", idle lanes poll " + std::to_string(options_.lane_spin_us) + " us" : "");
}

void DataMover::submit(std::shared_ptr<Job> job) {
  job->results.assign(job->descs.size(), DescResult{});
  job->tiers.assign(job->descs.size(), -1);
  for (const JobDesc& d : job->descs) job->foreign = job->foreign || d.region->remote() != nullptr;
  std::vector<Batch> batches;
  std::size_t i = 0;
  while (i < job->descs.size()) {
    if (streams(*job, i)) {
      batches.push_back(Batch{job, i, 1, true});
      ++i;
      continue;
    }
    if (job->descs[i].len > slot_bytes_) {  // cannot be staged whole
      job->results[i].status = job->fault.raise(
          XferStatus::TooLarge,
          "'" + std::string(job->descs[i].key) + "': " + std::to_string(job->descs[i].len) +
              " bytes exceed the agent's staging slot of " + std::to_string(slot_bytes_) +
              " bytes (raise AgentServiceOptions::staging_mib or lower AgentServiceOptions::queue_depth)",
          job->descs[i].key);
      ++i;
      continue;
    }
    Batch b{job, i, 0};
    std::size_t bytes = 0;
    const BlockCopier::Way way = copier_->way(job->op, job->descs[i].len);
    while (i < job->descs.size() && job->descs[i].len <= slot_bytes_ && !streams(*job, i)) {
      const std::size_t need = align_up(job->descs[i].len);
      if (b.count > 0 && (bytes + need > options_.chunk_bytes || bytes + need > slot_bytes_ ||
                          b.count == options_.chunk_blocks))
        break;
      if (b.count > 0 && copier_->way(job->op, job->descs[i].len) != way) break;
      bytes += need;
      ++b.count;
      ++i;
    }
    batches.push_back(b);
  }
  if (batches.empty()) {
    job->answered.store(true);
    job->on_done(*job);
    return;
  }
  job->batches_left.store(batches.size());
  const auto now = std::chrono::steady_clock::now();
  for (auto& b : batches) b.queued_at = now;
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
  BlockCopier::Flight copy;
  XferStatus copied = XferStatus::Ok;  // the copy's status: a failure fails every block of the batch
  bool staged = false;  // a block uses the lane's staging slot (there is one per lane)
  std::vector<BlockRef> blocks;
  std::vector<std::uint64_t> sums;  // push: each block's checksum; pull: the stored one of borrowed blocks
  // push
  store::Lease lease;
  std::vector<store::PutItem> items;
  // pull
  std::vector<std::uint8_t> borrowed;              // found in zero-copy memory, read in place
  std::vector<std::shared_ptr<const void>> holds;  // keep the borrowed bytes until the copy is done
  std::vector<store::GetItem> gets;                // the rest, read from storage into staging
  std::vector<std::size_t> got;                    // gets[i] is block got[i]
  std::vector<std::uint64_t> computed;             // pull: borrowed blocks' sums as copied

  // Only a kernel copy with no block in the staging slot may stay in flight while
  // the lane begins another batch (which may use the slot).
  bool may_stay_in_flight() const { return copy.started && !staged; }
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
  lk.unlock();
  phases_.add(Phase::Queue, std::chrono::steady_clock::now() - b->queued_at);
  return true;
}

void DataMover::run(int lane) {
  std::array<Flight, gpu::Lanes::kHashedSlots> flights;
  for (std::size_t i = 0; i < flights.size(); ++i) flights[i].copy.slot = static_cast<int>(i);
  std::size_t next = 0;
  Flight* in_flight = nullptr;
  const auto complete = [&](Flight& f) {
    end(lane, f);
    if (f.batch.job->foreign) release_owner_lane(f.batch.job);
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
    if (got && b.job->answered.load(std::memory_order_relaxed)) {
      // Its request was answered already (abandoned): nothing of it runs.
      finish_batch(b.job);
      continue;
    }
    if (got && b.job->foreign && !claim_owner_lane(b)) continue;
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
  if (job->batches_left.fetch_sub(1) == 1 && !job->answered.exchange(true)) job->on_done(*job);
}

void DataMover::watch(int lane, int slot, const std::shared_ptr<Job>& job) {
  LaneWatch& w = *watches_[static_cast<std::size_t>(lane)];
  std::lock_guard lk(w.mu);
  w.flights[static_cast<std::size_t>(slot)] = {job, std::chrono::steady_clock::now()};
}

void DataMover::watch_copy(int lane, Flight& f, bool on) {
  if (!f.batch.job->foreign) return;
  if (on)
    watch(lane, f.copy.slot, f.batch.job);
  else
    unwatch(lane, f.copy.slot);
}

void DataMover::unwatch(int lane, int slot) {
  LaneWatch& w = *watches_[static_cast<std::size_t>(lane)];
  std::lock_guard lk(w.mu);
  w.flights[static_cast<std::size_t>(slot)].job.reset();
}

bool DataMover::claim_owner_lane(Batch& b) {
  auto& lanes = b.job->owner_lanes ? *b.job->owner_lanes : *unowned_lanes_;
  std::lock_guard lk(mu_);  // against release_owner_lane()'s look at deferred_
  if (lanes.load(std::memory_order_relaxed) < foreign_lanes_max_) {
    lanes.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  b.deferred_at = std::chrono::steady_clock::now();
  deferred_.push_back(std::move(b));
  return false;
}

void DataMover::release_owner_lane(const std::shared_ptr<Job>& job) {
  const auto& owner = job->owner_lanes ? job->owner_lanes : unowned_lanes_;
  {
    std::lock_guard lk(mu_);
    owner->fetch_sub(1, std::memory_order_relaxed);
    // The owner's oldest deferred batch goes first in line again.
    const auto it = std::find_if(deferred_.begin(), deferred_.end(), [&](const Batch& d) {
      return (d.job->owner_lanes ? d.job->owner_lanes : unowned_lanes_) == owner;
    });
    if (it == deferred_.end()) return;
    queue_.push_front(std::move(*it));
    deferred_.erase(it);
    queued_.store(queue_.size(), std::memory_order_release);
  }
  cv_.notify_one();
}

std::size_t DataMover::stuck_lanes() const {
  if (options_.memory_timeout.count() == 0) return 0;
  const auto now = std::chrono::steady_clock::now();
  std::size_t stuck = 0;
  for (const auto& w : watches_) {
    std::lock_guard lk(w->mu);
    bool held = false;
    for (const Watch& f : w->flights) held = held || (f.job && now - f.since > options_.memory_timeout);
    stuck += held;
  }
  return stuck;
}

void DataMover::watchdog() {
  // A quarter of the deadline between looks, so that an answer comes at most
  // a quarter late.
  const auto every = std::max<std::chrono::milliseconds>(options_.memory_timeout / 4, std::chrono::milliseconds(10));
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, every, [&] { return stopping_; })) {
    lk.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<std::shared_ptr<Job>, int>> late;
    for (std::size_t lane = 0; lane < watches_.size(); ++lane) {
      LaneWatch& w = *watches_[lane];
      std::lock_guard wl(w.mu);
      for (const Watch& f : w.flights)
        if (f.job && now - f.since > options_.memory_timeout && !f.job->answered.load(std::memory_order_relaxed))
          late.emplace_back(f.job, static_cast<int>(lane));
    }
    for (const auto& [job, lane] : late) abandon(job, lane, options_.memory_timeout);
    lk.lock();
    // Deferred batches waited as long for a lane their owner's memory holds:
    // their requests are answered too, and the batches end where they lie.
    std::vector<Batch> expired;
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (now - it->deferred_at > options_.memory_timeout) {
        expired.push_back(std::move(*it));
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
    if (expired.empty()) continue;
    lk.unlock();
    for (auto& b : expired) {
      abandon(b.job, -1, options_.memory_timeout);
      finish_batch(b.job);
    }
    lk.lock();
  }
}

void DataMover::abandon(const std::shared_ptr<Job>& job, int lane, std::chrono::steady_clock::duration waited) {
  if (job->answered.exchange(true)) return;
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
  std::string why;
  if (lane >= 0) {
    // Every memory of the request reached by copy calls goes: the watchdog
    // cannot tell which of them hung, and a later request must fail at once
    // rather than hold another lane.
    std::string what;
    for (const JobDesc& d : job->descs)
      if (const RemoteMemory* m = d.region->remote(); m != nullptr && !m->gone()) {
        m->mark_unresponsive();
        if (what.empty()) what = m->describe();
      }
    why = "the application's memory (" + what + ") did not answer a copy within " + std::to_string(ms) +
          " ms (a hung FUSE or NFS mapping?); the request failed and the memory was dropped";
    log::app().error("lane {}: {}; the lane stays in the kernel until that memory answers", lane, why);
  } else {
    why = "the request waited " + std::to_string(ms) +
          " ms for a copy lane: its user's other copies hold every lane one user may (memory that does not "
          "answer?)";
    log::app().error("{}", why);
  }
  failures_.fetch_add(job->descs.size(), std::memory_order_relaxed);
  if (job->on_abandoned) job->on_abandoned(why);
}

void DataMover::begin(int lane, Flight& f) {
  batches_.fetch_add(1, std::memory_order_relaxed);
  f.staged = false;
  f.copy.started = false;
  f.copied = XferStatus::Ok;
  if (f.batch.streamed) {
    // Storage's own time is in the watched span here: the object moves
    // between the application and storage piece by piece.
    watch_copy(lane, f, true);
    const bool streamed = stream(f);
    watch_copy(lane, f, false);
    if (streamed) return;
  }
  const Job& job = *f.batch.job;
  f.copy.way = copier_->way(job.op, job.descs[f.first()].len);
  if (job.op == XferOp::Write)
    begin_write(lane, f);
  else
    begin_read(lane, f);
}

void DataMover::end(int lane, Flight& f) {
  if (f.batch.streamed) return;  // settled in begin()
  if (f.batch.job->op == XferOp::Write)
    end_write(lane, f);
  else
    end_read(lane, f);
}

bool DataMover::streams(const Job& job, std::size_t i) const noexcept {
  const JobDesc& d = job.descs[i];
  return !d.region->on_device() && d.len > storage_.stream_above();
}

bool DataMover::stream(Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t i = f.first();
  const JobDesc& d = job.descs[i];
  DescResult& r = job.results[i];
  BlockRef block;
  block.app = d.region->at(d.offset);
  block.len = d.len;
  block.remote = d.region->remote();
  PhaseTimer stream_time(phases_, Phase::Stream);
  std::optional<XferStatus> s;
  int tier = -1;
  std::uint64_t size = 0;
  if (job.op == XferOp::Write) {
    s = storage_.put_streamed(d.key, d.len, AppSource(block, d.key, phases_), &tier, job.fault);
    size = d.len;
  } else {
    s = storage_.get_streamed(d.key, d.len, AppSink(block, d.key, phases_), &size, &tier, job.fault);
  }
  if (!s) {
    if (d.len <= slot_bytes_) {
      f.batch.streamed = false;
      return false;
    }
    r.status = job.fault.raise(XferStatus::TooLarge,
                               "'" + std::string(d.key) + "': " + std::to_string(d.len) +
                                   " bytes exceed the agent's staging slot of " +
                                   std::to_string(slot_bytes_) + " bytes, and the tier it would " +
                                   (job.op == XferOp::Write ? "go to is full or" : "come from") +
                                   " does not stream (raise AgentServiceOptions::staging_mib or lower "
                                   "AgentServiceOptions::queue_depth)",
                               d.key);
    return true;
  }
  r.status = *s;
  if (*s == XferStatus::Ok || *s == XferStatus::TooLarge) {
    r.size = size;
    job.tiers[i] = tier;
  }
  if (*s == XferStatus::Ok) {
    (job.op == XferOp::Write ? bytes_written_ : bytes_read_).fetch_add(size, std::memory_order_relaxed);
    (job.op == XferOp::Write ? objects_written_ : objects_read_).fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

void DataMover::begin_write(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  std::uint8_t* slot = staging_ + static_cast<std::size_t>(lane) * slot_bytes_;
  // Each block lands where it will be stored when storage offers zero-copy and
  // has room (a reserved range it then adopts: no second copy), else in this
  // lane's staging slot. The whole batch's ranges in one call (one lock).
  PhaseTimer reserve_time(phases_, Phase::Reserve);
  thread_local std::vector<std::uint64_t> sizes;
  sizes.resize(count);
  for (std::size_t k = 0; k < count; ++k) sizes[k] = job.descs[first + k].len;
  storage_.reserve(sizes, f.lease);
  f.blocks.resize(count);
  std::size_t off = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const JobDesc& d = job.descs[first + k];
    BlockRef& b = f.blocks[k];
    b.app = d.region->at(d.offset);
    b.len = d.len;
    b.on_device = d.region->on_device();
    b.remote = d.region->remote();
    if (f.lease.ranges()[k].range.data != nullptr) {
      b.host = f.lease.ranges()[k].range.data;
    } else {
      b.host = slot + off;
      off += align_up(d.len);
      f.staged = true;
    }
  }
  reserve_time.stop();

  f.sums.resize(count);
  PhaseTimer copy_time(phases_, Phase::Copy);
  watch_copy(lane, f, true);
  f.copied = copier_->start_push(lane, f.copy, f.blocks, f.sums, job.fault);
  watch_copy(lane, f, false);
}

void DataMover::end_write(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  PhaseTimer copy_time(phases_, Phase::Copy);
  watch_copy(lane, f, true);
  if (f.copied == XferStatus::Ok) f.copied = copier_->finish_push(lane, f.copy, f.blocks, f.sums, job.fault);
  watch_copy(lane, f, false);
  copy_time.stop();
  // Answered already (abandoned at the deadline): the application was told it
  // failed, and may have stored the key anew since. Nothing of it is stored.
  if (f.copied == XferStatus::Ok && job.answered.load(std::memory_order_relaxed)) f.copied = XferStatus::Cancelled;
  PhaseTimer put_time(phases_, Phase::Put);

  if (f.copied != XferStatus::Ok) {
    for (std::size_t k = 0; k < count; ++k) job.results[first + k] = {f.copied, 0, "", ""};
  } else {
    f.items.clear();
    for (std::size_t k = 0; k < count; ++k) {
      store::PutItem& it = f.items.emplace_back();
      it.key = job.descs[first + k].key;
      it.data = ByteView{f.blocks[k].host, f.blocks[k].len};
      it.checksum = f.sums[k];
    }
    storage_.put(f.items, job.fault);
    for (std::size_t k = 0; k < count; ++k) {
      const store::PutItem& it = f.items[k];
      DescResult& r = job.results[first + k];
      r.status = it.status;
      if (it.status == XferStatus::Ok) {
        r.size = it.data.size;
        job.tiers[first + k] = it.tier;
        bytes_written_.fetch_add(it.data.size, std::memory_order_relaxed);
        objects_written_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  // What storage did not adopt goes back now (a failed copy, a put that went to
  // a lower tier). The adopted ranges are let go of without a lookup each: with
  // small blocks, a release per block under the pool's lock is a visible share
  // of a push.
  if (f.copied == XferStatus::Ok) f.lease.forget_adopted(f.items, storage_.zero_copy_tier());
  f.lease.release();
}

void DataMover::begin_read(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  std::uint8_t* slot = staging_ + static_cast<std::size_t>(lane) * slot_bytes_;
  // Objects in zero-copy memory are copied out of it in place, and verified
  // while (or, by the kernel, as) the copy runs; the rest are read (and
  // verified) from storage into this lane's staging slot first.
  f.blocks.resize(count);
  f.sums.assign(count, 0);
  f.borrowed.assign(count, 0);
  f.holds.clear();
  f.gets.clear();
  f.got.clear();
  PhaseTimer lookup_time(phases_, Phase::Lookup);
  // The whole batch's lookups in one call (one lock of the tier's index).
  thread_local std::vector<std::string_view> keys;
  thread_local std::vector<std::optional<store::Borrowed>> found;
  keys.resize(count);
  found.assign(count, std::nullopt);
  for (std::size_t k = 0; k < count; ++k) keys[k] = job.descs[first + k].key;
  storage_.borrow(keys, found);
  std::size_t off = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const JobDesc& d = job.descs[first + k];
    DescResult& r = job.results[first + k];
    BlockRef& b = f.blocks[k];
    b.app = d.region->at(d.offset);
    b.on_device = d.region->on_device();
    b.remote = d.region->remote();
    b.len = 0;
    if (auto& got = found[k]) {
      r.size = got->bytes.size;
      job.tiers[first + k] = storage_.zero_copy_tier();
      if (got->bytes.size > d.len) {
        r.status = job.fault.raise(XferStatus::TooLarge,
                                   "'" + std::string(d.key) + "' has " + std::to_string(got->bytes.size) +
                                       " bytes, the buffer holds " + std::to_string(d.len),
                                   d.key);
      } else {
        r.status = XferStatus::Ok;
        b.host = const_cast<std::uint8_t*>(got->bytes.data);
        f.sums[k] = got->checksum;
        f.borrowed[k] = 1;
        f.holds.push_back(std::move(got->hold));  // the bytes stay valid until the copy is done
      }
      continue;
    }
    b.host = slot + off;
    f.staged = true;
    f.got.push_back(k);
    store::GetItem& it = f.gets.emplace_back();
    it.key = d.key;
    it.out = MutableByteView{slot + off, d.len};
    off += align_up(d.len);
  }
  storage_.get(f.gets, job.fault);
  for (std::size_t i = 0; i < f.got.size(); ++i) {
    const store::GetItem& it = f.gets[i];
    DescResult& r = job.results[first + f.got[i]];
    r.status = it.status;
    // TooLarge carries the object's size too, so that the application can read
    // it again into a block that fits (docs/xfer-tiers.md, section 7).
    if (it.status == XferStatus::Ok || it.status == XferStatus::TooLarge) {
      r.size = it.size;
      job.tiers[first + f.got[i]] = it.tier;
    }
  }
  lookup_time.stop();

  PhaseTimer copy_time(phases_, Phase::Copy);
  for (std::size_t k = 0; k < count; ++k) {
    const DescResult& r = job.results[first + k];
    if (r.status == XferStatus::Ok) f.blocks[k].len = r.size;
  }
  watch_copy(lane, f, true);
  f.copied = copier_->start_pull(lane, f.copy, f.blocks, job.fault);
  watch_copy(lane, f, false);
}

void DataMover::end_read(int lane, Flight& f) {
  Job& job = *f.batch.job;
  const std::size_t first = f.first(), count = f.count();
  PhaseTimer copy_time(phases_, Phase::Copy);
  f.computed.assign(count, 0);
  // Verifies only the borrowed blocks: storage's get verified the staged ones.
  // A mismatch fails the descriptor: the application must not use what landed
  // in its buffer.
  if (f.copied == XferStatus::Ok) {
    watch_copy(lane, f, true);
    f.copied = copier_->finish_pull(lane, f.copy, f.blocks, f.borrowed, f.computed, job.fault);
    watch_copy(lane, f, false);
  }
  copy_time.stop();
  PhaseTimer verify_time(phases_, Phase::Verify);
  for (std::size_t k = 0; f.copied == XferStatus::Ok && k < count; ++k) {
    if (!f.borrowed[k] || f.computed[k] == f.sums[k]) continue;
    const std::string_view key = job.descs[first + k].key;
    job.results[first + k].status =
        job.fault.raise(XferStatus::ChecksumMismatch,
                        "'" + std::string(key) + "' fails its checksum where it is stored (stored " +
                            checksum_hex(f.sums[k]) + ", computed " + checksum_hex(f.computed[k]) + ")",
                        key);
  }
  f.holds.clear();  // the copies are done: the borrowed bytes may go
  if (f.copied != XferStatus::Ok) {
    for (std::size_t k = 0; k < count; ++k) {
      DescResult& r = job.results[first + k];
      if (r.status == XferStatus::Ok) r = {f.copied, 0, "", ""};
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
