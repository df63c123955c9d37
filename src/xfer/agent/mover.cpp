#include "xfer/agent/mover.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/checksum.h"
#include "xfer/store/xxh3_parts.h"

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
  if (options_.chunk_bytes > slot_bytes_)
    throw Error("--chunk-kib " + std::to_string(options_.chunk_bytes >> 10) + " exceeds a staging slot (" +
                std::to_string(slot_bytes_ >> 10) + " KiB = --staging-mib / --queue-depth)");
  const std::size_t total = slot_bytes_ * static_cast<std::size_t>(options_.queue_depth);
  if (options_.gpu) {
    staging_ = static_cast<std::uint8_t*>(gpu::alloc_pinned(total));
    lanes_ = std::make_unique<gpu::Lanes>(options_.device, options_.queue_depth, options_.copy, slot_bytes_,
                                          store::xxh3_default_secret());
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
                                    " KiB (pulls) blocks, cudaMemcpyBatchAsync at and above")
                       : "") +
         "), batches up to " + std::to_string(options_.chunk_bytes >> 10) + " KiB";
}

void DataMover::submit(std::shared_ptr<Job> job) {
  job->results.assign(job->descs.size(), DescResult{});
  std::vector<Batch> batches;
  std::size_t i = 0;
  while (i < job->descs.size()) {
    if (job->descs[i].len > slot_bytes_) {  // cannot be staged whole
      job->results[i] = {XferStatus::TooLarge, 0, "",
                         "'" + job->descs[i].key + "': " + std::to_string(job->descs[i].len) +
                             " bytes exceed the agent's staging slot of " + std::to_string(slot_bytes_) +
                             " bytes (raise --staging-mib or lower --queue-depth)"};
      ++i;
      continue;
    }
    Batch b{job, i, 0};
    std::size_t bytes = 0;
    while (i < job->descs.size() && job->descs[i].len <= slot_bytes_) {
      const std::size_t need = align_up(job->descs[i].len);
      if (b.count > 0 && (bytes + need > options_.chunk_bytes || bytes + need > slot_bytes_)) break;
      if (b.count > 0 && by_kernel(job->op, job->descs[i].len) != by_kernel(job->op, job->descs[b.first].len)) break;
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
  }
  cv_.notify_all();
}

void DataMover::run(int lane) {
  for (;;) {
    Batch b;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      b = std::move(queue_.front());
      queue_.pop_front();
    }
    process(lane, b);
    finish_batch(b.job);
  }
}

void DataMover::finish_batch(const std::shared_ptr<Job>& job) {
  if (job->batches_left.fetch_sub(1) == 1) job->on_done(*job);
}

void DataMover::process(int lane, const Batch& b) {
  batches_.fetch_add(1, std::memory_order_relaxed);
  if (b.job->op == XferOp::Write)
    write_batch(lane, *b.job, b.first, b.count);
  else
    read_batch(lane, *b.job, b.first, b.count);
  for (std::size_t i = b.first; i < b.first + b.count; ++i)
    if (is_error(b.job->results[i].status)) failures_.fetch_add(1, std::memory_order_relaxed);
}

void DataMover::write_batch(int lane, Job& job, std::size_t first, std::size_t count) {
  std::uint8_t* slot = staging_ + static_cast<std::size_t>(lane) * slot_bytes_;
  // Each block lands where it will be stored when the top tier is DRAM and has
  // room (a reserved pool range the tier then adopts: no second copy), else in
  // this lane's staging slot.
  thread_local std::vector<std::uint8_t*> host;
  thread_local std::vector<MutableByteView> reserved;
  host.clear();
  reserved.clear();
  PhaseTimer reserve_time(phases_, Phase::Reserve);
  // The whole batch's ranges under one lock of the tier's allocator.
  reserved.assign(count, MutableByteView{nullptr, 0});
  if (dram_ != nullptr) {
    thread_local std::vector<std::uint64_t> sizes;
    sizes.resize(count);
    for (std::size_t k = 0; k < count; ++k) sizes[k] = job.descs[first + k].len;
    dram_->reserve(sizes, reserved);
  }
  std::size_t off = 0;
  for (std::size_t k = 0; k < count; ++k) {
    if (reserved[k].data != nullptr) {
      host.push_back(reserved[k].data);
    } else {
      host.push_back(slot + off);
      off += align_up(job.descs[first + k].len);
    }
  }
  reserve_time.stop();

  thread_local std::vector<std::uint64_t> sums;
  sums.assign(count, 0);
  std::string error;
  PhaseTimer copy_time(phases_, Phase::Copy);
  const bool ok = by_kernel(XferOp::Write, job.descs[first].len) ? push_by_kernel(lane, job, first, count, host, sums, &error)
                              : push_by_engine(lane, job, first, count, host, sums, &error);
  copy_time.stop();
  PhaseTimer put_time(phases_, Phase::Put);

  thread_local std::vector<store::PutItem> items;
  items.clear();
  if (!ok) {
    for (std::size_t k = 0; k < count; ++k)
      job.results[first + k] = {XferStatus::IoError, 0, "", "'" + job.descs[first + k].key + "': " + error};
  } else {
    for (std::size_t k = 0; k < count; ++k) {
      store::PutItem& it = items.emplace_back();
      it.key = job.descs[first + k].key;
      it.data = ByteView{host[k], job.descs[first + k].len};
      it.checksum = sums[k];
    }
    chain_.put(items);
    for (std::size_t k = 0; k < count; ++k) {
      store::PutItem& it = items[k];
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
    for (std::size_t k = 0; k < items.size(); ++k)
      if (items[k].adopted) reserved[k] = MutableByteView{nullptr, 0};
    dram_->unreserve(reserved);
  }
}

bool DataMover::push_by_engine(int lane, const Job& job, std::size_t first, std::size_t count,
                               std::span<std::uint8_t* const> host, std::span<std::uint64_t> sums,
                               std::string* error) {
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
        segs.push_back({host[k] + at, app + at, len});
        pieces.push_back({k, at, len, tickets.size()});
        if ((wave_bytes += len) >= wave_target) close_wave();
      } else {
        std::memcpy(host[k] + at, app + at, len);
        pieces.push_back({k, at, len, kNoWave});
      }
    }
  }
  close_wave();

  std::unique_ptr<store::ChecksumStream> stream;
  std::size_t waited = 0;
  for (const Piece& p : pieces) {
    if (!ok) break;
    if (p.wave != kNoWave && p.wave >= waited) {
      ok = lanes_->wait(lane, tickets[p.wave], error);
      waited = p.wave + 1;
      if (!ok) break;
    }
    const std::size_t len = job.descs[first + p.k].len;
    const ByteView bytes{host[p.k] + p.offset, p.len};
    if (p.len == len) {
      sums[p.k] = store::checksum(bytes);
      continue;
    }
    if (p.offset == 0) stream = std::make_unique<store::ChecksumStream>();
    stream->update(bytes);
    if (p.offset + p.len == len) sums[p.k] = stream->digest();
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

// The kernel copies each device block and hashes it on the way; the CPU copies
// and hashes only host (memfd) blocks and what the kernel leaves (240 bytes or
// less, unaligned).
bool DataMover::push_by_kernel(int lane, const Job& job, std::size_t first, std::size_t count,
                               std::span<std::uint8_t* const> host, std::span<std::uint64_t> sums,
                               std::string* error) {
  thread_local std::vector<gpu::Segment> segs;
  thread_local std::vector<std::size_t> seg_k;
  thread_local std::vector<std::uint64_t> gpu_sums;
  thread_local std::vector<std::uint8_t> hashed;
  segs.clear();
  seg_k.clear();
  for (std::size_t k = 0; k < count; ++k) {
    const JobDesc& d = job.descs[first + k];
    const std::uint8_t* app = d.region->base() + d.offset;
    if (d.region->on_device() && d.len > 0) {
      segs.push_back({host[k], app, d.len});
      seg_k.push_back(k);
    } else {
      std::memcpy(host[k], app, d.len);
      sums[k] = store::checksum({host[k], d.len});
    }
  }
  gpu_sums.resize(segs.size());
  hashed.resize(segs.size());
  if (!lanes_->copy_hashed(lane, segs, false, gpu_sums.data(), hashed.data(), error)) return false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::size_t k = seg_k[i];
    sums[k] = hashed[i] != 0 ? gpu_sums[i] : store::checksum({host[k], job.descs[first + k].len});
  }
  return true;
}

void DataMover::read_batch(int lane, Job& job, std::size_t first, std::size_t count) {
  std::uint8_t* slot = staging_ + static_cast<std::size_t>(lane) * slot_bytes_;
  // Objects in the DRAM tier are copied out of its pool in place, and verified
  // while the copy runs; the rest are read (and verified) from the chain into
  // this lane's staging slot first.
  thread_local std::vector<std::uint8_t*> host;
  thread_local std::vector<std::shared_ptr<const void>> holds;
  thread_local std::vector<std::uint64_t> expected;  // borrowed objects' stored checksums
  thread_local std::vector<std::size_t> staged;
  thread_local std::vector<store::GetItem> items;
  host.assign(count, nullptr);
  expected.assign(count, 0);
  holds.clear();
  staged.clear();
  items.clear();
  thread_local std::vector<bool> borrowed;
  borrowed.assign(count, false);
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
        r.error = "'" + d.key + "' has " + std::to_string(b->bytes.size) + " bytes, the buffer holds " +
                  std::to_string(d.len);
      } else {
        r.status = XferStatus::Ok;
        host[k] = const_cast<std::uint8_t*>(b->bytes.data);
        expected[k] = b->checksum;
        borrowed[k] = true;
        holds.push_back(std::move(b->hold));  // the bytes stay valid until the copy is done
      }
      continue;
    }
    host[k] = slot + off;
    staged.push_back(k);
    store::GetItem& it = items.emplace_back();
    it.key = d.key;
    it.out = MutableByteView{slot + off, d.len};
    off += align_up(d.len);
  }
  chain_.get(items);
  for (std::size_t i = 0; i < staged.size(); ++i) {
    store::GetItem& it = items[i];
    DescResult& r = job.results[first + staged[i]];
    r.status = it.status;
    r.error = std::move(it.error);
    if (it.status == XferStatus::Ok) {
      r.size = it.size;
      r.tier = tier_name(it.tier);
    }
  }

  lookup_time.stop();

  PhaseTimer copy_time(phases_, Phase::Copy);
  constexpr std::size_t kNoSeg = ~std::size_t{0};
  thread_local std::vector<gpu::Segment> segs;
  thread_local std::vector<std::size_t> seg_of;  // k -> its segment, or kNoSeg
  segs.clear();
  seg_of.assign(count, kNoSeg);
  for (std::size_t k = 0; k < count; ++k) {
    const DescResult& r = job.results[first + k];
    if (r.status != XferStatus::Ok || r.size == 0) continue;
    const JobDesc& d = job.descs[first + k];
    std::uint8_t* app = d.region->base() + d.offset;
    if (d.region->on_device()) {
      seg_of[k] = segs.size();
      segs.push_back({app, host[k], r.size});
    } else {
      std::memcpy(app, host[k], r.size);
    }
  }
  std::string error;
  bool ok = true;
  const bool kernel = by_kernel(XferOp::Read, job.descs[first].len);
  // The copy kernel hashes what it copies (and waits); a copy engine's DMA reads
  // the pool while the CPU verifies the same bytes.
  thread_local std::vector<std::uint64_t> gpu_sums;
  thread_local std::vector<std::uint8_t> hashed;
  gpu_sums.assign(segs.size(), 0);
  hashed.assign(segs.size(), 0);
  if (kernel)
    ok = lanes_->copy_hashed(lane, segs, true, gpu_sums.data(), hashed.data(), &error);
  else if (lanes_ != nullptr)
    ok = lanes_->start(lane, segs, true, &error);
  copy_time.stop();
  PhaseTimer verify_time(phases_, Phase::Verify);
  // A mismatch fails the descriptor: the application must not use what landed in its buffer.
  for (std::size_t k = 0; k < count; ++k) {
    if (!borrowed[k]) continue;
    DescResult& r = job.results[first + k];
    const std::size_t i = seg_of[k];
    const std::uint64_t sum =
        i != kNoSeg && hashed[i] != 0 ? gpu_sums[i] : store::checksum({host[k], r.size});
    if (sum != expected[k]) {
      r.status = XferStatus::ChecksumMismatch;
      r.error = "'" + job.descs[first + k].key + "' fails its checksum in " + dram_name + " (stored " +
                store::checksum_hex(expected[k]) + ", computed " + store::checksum_hex(sum) + ")";
    }
  }
  if (!kernel && !segs.empty() && !lanes_->finish(lane, &error)) ok = false;
  if (!ok) {
    for (std::size_t k = 0; k < count; ++k) {
      DescResult& r = job.results[first + k];
      if (r.status == XferStatus::Ok) r = {XferStatus::IoError, 0, "", "'" + job.descs[first + k].key + "': " + error};
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
