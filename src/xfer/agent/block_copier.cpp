#include "xfer/agent/block_copier.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "ferry/xfer/checksum.h"
#include "xfer/checksum/xxh3_parts.h"
#include "xfer/gpu/leaf_segments.h"

namespace ferry::xfer::agent {
namespace {

// The unit of pipelining: a block is copied, and hashed, in pieces of this size.
constexpr std::size_t kPieceBytes = 1u << 20;

// A host block copied into staging and checksummed piece by piece, each leaf
// hashed while its piece is still in cache: one pass over memory fewer than
// copying the whole block and then hashing it (a 32 MiB block outgrows every
// cache). Pieces are whole leaves, so the leaf sums are the checksum's own.
XferStatus copy_and_hash(const BlockRef& b, std::uint64_t* sum, Fault& fault) noexcept {
  static_assert(kPieceBytes % kChecksumLeafBytes == 0);
  if (b.len <= kChecksumLeafBytes) {
    const XferStatus s = read_app(b, 0, b.host, b.len, fault);
    *sum = checksum({b.host, b.len});
    return s;
  }
  thread_local std::vector<std::uint64_t> leaves;  // grows to the largest block once, then reused
  leaves.resize((b.len + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
  for (std::size_t at = 0; at < b.len; at += kPieceBytes) {
    const std::size_t n = std::min(kPieceBytes, b.len - at);
    if (const XferStatus s = read_app(b, at, b.host + at, n, fault); s != XferStatus::Ok) return s;
    leaf_checksums({b.host + at, n}, &leaves[at / kChecksumLeafBytes]);
  }
  *sum = combine_leaf_sums(leaves);
  return XferStatus::Ok;
}

}  // namespace

BlockCopier::BlockCopier(const CopyOptions& options, int lanes, std::size_t slot_bytes) : options_(options) {
  if (options_.gpu)
    lanes_ = std::make_unique<gpu::Lanes>(options_.device, lanes, options_.method, slot_bytes, xxh3_default_secret());
}

BlockCopier::~BlockCopier() = default;

BlockCopier::Way BlockCopier::way(XferOp op, std::size_t len) const noexcept {
  const std::size_t below = op == XferOp::Write ? options_.kernel_below : options_.kernel_below_pull;
  Way w;
  w.kernel = lanes_ != nullptr && (options_.method == gpu::CopyMethod::Kernel ||
                                   (options_.method == gpu::CopyMethod::Auto && len < below));
  if (w.kernel && options_.method == gpu::CopyMethod::Auto && options_.engines_from > 0 &&
      len >= options_.engines_from)
    w.how = gpu::HashedCopy::Engines;
  return w;
}

std::string BlockCopier::describe() const {
  if (!options_.gpu) return "host, memcpy";
  std::string method;
  switch (options_.method) {
    case gpu::CopyMethod::Batch: method = "cudaMemcpyBatchAsync"; break;
    case gpu::CopyMethod::Loop: method = "cudaMemcpyAsync loop"; break;
    case gpu::CopyMethod::Kernel: method = "copy kernel with XXH3 on the GPU"; break;
    case gpu::CopyMethod::Auto:
      method = "copy kernel with XXH3 on the GPU below " + std::to_string(options_.kernel_below >> 10) +
               " KiB (pushes) / " + std::to_string(options_.kernel_below_pull >> 10) +
               " KiB (pulls) blocks, cudaMemcpyBatchAsync at and above" +
               (options_.engines_from > 0 ? "; from " + std::to_string(options_.engines_from >> 10) +
                                                " KiB on, cudaMemcpyBatchAsync copies and the kernel only hashes"
                                          : std::string());
      break;
  }
  return "pinned, CUDA " + method;
}

// ---- push -----------------------------------------------------------------------

XferStatus BlockCopier::start_push(int lane, Flight& f, std::span<const BlockRef> blocks,
                                   std::span<std::uint64_t> sums, Fault& fault) noexcept {
  std::fill(sums.begin(), sums.end(), 0);
  f.started = false;
  if (!f.way.kernel) return XferStatus::Ok;  // the engines' path runs whole in finish_push
  // The kernel hashes each device block leaf by leaf, while it copies it or,
  // from engines_from on, after the copy engines have; the CPU copies and
  // hashes only host (memfd) blocks, and hashes what the kernel leaves (a leaf
  // of 240 bytes or less, unaligned: see finish_push).
  f.segs.clear();
  f.seg_of.assign(blocks.size(), Flight::kNoSeg);
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const BlockRef& b = blocks[k];
    if (b.on_device && b.len > 0) {
      f.seg_of[k] = f.segs.size();
      gpu::append_leaves({b.host, b.app, b.len}, &f.segs);
    } else if (const XferStatus s = copy_and_hash(b, &sums[k], fault); s != XferStatus::Ok) {
      return s;
    }
  }
  const XferStatus s = lanes_->start_hashed(lane, f.slot, f.segs, false, f.way.how, fault);
  f.started = s == XferStatus::Ok;
  return s;
}

XferStatus BlockCopier::finish_push(int lane, Flight& f, std::span<const BlockRef> blocks,
                                    std::span<std::uint64_t> sums, Fault& fault) noexcept {
  if (!f.way.kernel) return push_by_engines(lane, blocks, sums, fault);
  f.started = false;
  f.gpu_sums.resize(f.segs.size());
  f.hashed.resize(f.segs.size());
  const XferStatus s = lanes_->collect_hashed(lane, f.slot, f.gpu_sums.data(), f.hashed.data(), fault);
  if (s != XferStatus::Ok) return s;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const std::size_t i = f.seg_of[k];
    if (i == Flight::kNoSeg) continue;
    const auto sum = gpu::checksum_from_leaves(f.gpu_sums, f.hashed, i, blocks[k].len);
    sums[k] = sum ? *sum : checksum({blocks[k].host, blocks[k].len});
  }
  return XferStatus::Ok;
}

XferStatus BlockCopier::push_by_engines(int lane, std::span<const BlockRef> blocks, std::span<std::uint64_t> sums,
                                        Fault& fault) noexcept {
  // Copy in waves of pieces, and checksum each piece as soon as its wave has
  // landed, while the later waves are still crossing PCIe: a large block is
  // hashed behind its own DMA instead of after it (the reference's chunked,
  // pipelined DMA).
  struct Piece {
    std::size_t k, offset, len, wave;
  };
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<gpu::Segment> segs;
  thread_local std::vector<std::uint64_t> tickets;
  pieces.clear();
  segs.clear();
  tickets.clear();
  std::size_t batch_bytes = 0;
  for (const BlockRef& b : blocks) batch_bytes += b.len;
  const std::size_t wave_target = std::max(kPieceBytes, batch_bytes / (gpu::Lanes::kMarks / 2));
  std::size_t wave_bytes = 0;
  XferStatus s = XferStatus::Ok;
  const auto close_wave = [&] {
    if (segs.empty()) return;
    if (s == XferStatus::Ok) s = lanes_->start(lane, segs, false, fault);
    tickets.push_back(lanes_->mark(lane));
    segs.clear();
    wave_bytes = 0;
  };
  for (std::size_t k = 0; k < blocks.size() && s == XferStatus::Ok; ++k) {
    const BlockRef& b = blocks[k];
    if (!b.on_device) {  // host memory: copied and hashed here, while the waves cross PCIe
      s = copy_and_hash(b, &sums[k], fault);
      continue;
    }
    for (std::size_t at = 0; at < b.len; at += kPieceBytes) {
      const std::size_t len = std::min<std::size_t>(kPieceBytes, b.len - at);
      segs.push_back({b.host + at, b.app + at, len});
      pieces.push_back({k, at, len, tickets.size()});
      if ((wave_bytes += len) >= wave_target) close_wave();
    }
  }
  close_wave();

  std::optional<ChecksumStream> stream;
  std::size_t waited = 0;
  for (const Piece& p : pieces) {
    if (s != XferStatus::Ok) break;
    if (p.wave >= waited) {
      s = lanes_->wait(lane, tickets[p.wave], fault);
      waited = p.wave + 1;
      if (s != XferStatus::Ok) break;
    }
    const std::size_t len = blocks[p.k].len;
    const ByteView bytes{blocks[p.k].host + p.offset, p.len};
    if (p.len == len) {
      sums[p.k] = checksum(bytes);
      continue;
    }
    if (p.offset == 0) stream.emplace();
    stream->update(bytes);
    if (p.offset + p.len == len) sums[p.k] = stream->digest();
  }
  if (!tickets.empty()) {  // drain the lane even after a failure: the next batch reuses its slot
    const XferStatus drained = lanes_->finish(lane, fault);
    if (s == XferStatus::Ok) s = drained;
  }
  return s;
}

// ---- pull -----------------------------------------------------------------------

XferStatus BlockCopier::start_pull(int lane, Flight& f, std::span<const BlockRef> blocks, Fault& fault) noexcept {
  // The copy kernel hashes what it copies (leaf by leaf); by the copy engines,
  // finish_pull starts the DMA and hashes on the CPU while it runs.
  f.started = false;
  f.segs.clear();
  f.seg_of.assign(blocks.size(), Flight::kNoSeg);
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const BlockRef& b = blocks[k];
    if (b.len == 0) continue;
    if (b.on_device) {
      f.seg_of[k] = f.segs.size();
      if (f.way.kernel)
        gpu::append_leaves({b.app, b.host, b.len}, &f.segs);
      else
        f.segs.push_back({b.app, b.host, b.len});
    } else if (const XferStatus s = write_app(b, 0, b.host, b.len, fault); s != XferStatus::Ok) {
      return s;
    }
  }
  if (!f.way.kernel) return XferStatus::Ok;
  const XferStatus s = lanes_->start_hashed(lane, f.slot, f.segs, true, f.way.how, fault);
  f.started = s == XferStatus::Ok;
  return s;
}

XferStatus BlockCopier::finish_pull(int lane, Flight& f, std::span<const BlockRef> blocks,
                                    std::span<const std::uint8_t> verify, std::span<std::uint64_t> sums,
                                    Fault& fault) noexcept {
  f.gpu_sums.assign(f.segs.size(), 0);
  f.hashed.assign(f.segs.size(), 0);
  const bool by_engines = !f.way.kernel && lanes_ != nullptr && !f.segs.empty();
  XferStatus s = XferStatus::Ok;
  if (f.started) {
    f.started = false;
    s = lanes_->collect_hashed(lane, f.slot, f.gpu_sums.data(), f.hashed.data(), fault);
  } else if (by_engines) {
    s = lanes_->start(lane, f.segs, true, fault);
  }
  for (std::size_t k = 0; s == XferStatus::Ok && k < blocks.size(); ++k) {
    if (!verify[k]) continue;
    const std::size_t i = f.seg_of[k];
    std::optional<std::uint64_t> by_gpu;
    if (i != Flight::kNoSeg) by_gpu = gpu::checksum_from_leaves(f.gpu_sums, f.hashed, i, blocks[k].len);
    sums[k] = by_gpu ? *by_gpu : checksum({blocks[k].host, blocks[k].len});
  }
  if (by_engines) {  // drain the engines' DMA even after a failure
    const XferStatus drained = lanes_->finish(lane, fault);
    if (s == XferStatus::Ok) s = drained;
  }
  return s;
}

}  // namespace ferry::xfer::agent
