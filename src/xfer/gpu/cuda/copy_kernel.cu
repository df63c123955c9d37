// The gather/scatter copy kernel with its fused XXH3-64 (see copy_kernel.h).
//
// Why a kernel: with small blocks the copy engines (cudaMemcpyBatchAsync) pay a
// cost per copy and stay below the link's rate (docs/xfer.md); SM loads and
// stores with enough bytes in flight are not limited per copy the same way. And
// since the SMs read every byte anyway, they hash it too: the CPU no longer reads
// every byte back to checksum it, which is what holds 1 MiB and larger blocks
// below the copy rate (docs/bench/xfer.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "ferry/worker/cuda/cuda_check.h"
#include "xfer/gpu/cuda/copy_kernel.h"
#include "xfer/gpu/cuda/host_map.h"

namespace ferry::xfer::gpu::cuda {
namespace {

namespace xxh3 = xxh3;
using Obj = KernelLane::Obj;
using Piece = KernelLane::Piece;
static_assert(sizeof(Obj) == 32 && sizeof(Piece) == 8);

constexpr unsigned kPieceBlocks = 16;  // a warp's task: 16 KiB of one segment
constexpr unsigned kRoundBytes = 4096;  // per round, each lane has 8 x 16 bytes in flight
constexpr unsigned kThreads = 256;

__device__ __forceinline__ std::uint64_t lo64(const uint4& v) { return v.x | (std::uint64_t{v.y} << 32); }
__device__ __forceinline__ std::uint64_t hi64(const uint4& v) { return v.z | (std::uint64_t{v.w} << 32); }

// Round r of a piece: lane l loads the 16 bytes at 512*j + 16*l (j = 0..7), so
// each load instruction of the warp covers 512 contiguous bytes (whole PCIe
// lines). In XXH3's terms, vector j is part 32*(j%2) + l of block j/2: stripe
// (j%2)*8 + l/4, word pair q = l%4, so lane l always feeds accumulators 2q, 2q+1.
__global__ void __launch_bounds__(kThreads) copy_pieces(const Obj* objs, const Piece* pieces, std::uint32_t n_pieces,
                                                         ulonglong2* contrib, const __grid_constant__ xxh3::Keys keys) {
  const unsigned lane = threadIdx.x & 31u;
  const unsigned q = lane % 4, s0 = lane / 4, s1 = 8 + lane / 4;
  // This lane's secret words, fixed for every block.
  const std::uint64_t k00 = keys.stripe[s0 + 2 * q], k01 = keys.stripe[s0 + 2 * q + 1];
  const std::uint64_t k10 = keys.stripe[s1 + 2 * q], k11 = keys.stripe[s1 + 2 * q + 1];
  const unsigned warps = (gridDim.x * blockDim.x) / 32;
  for (unsigned p = (blockIdx.x * blockDim.x + threadIdx.x) / 32; p < n_pieces; p += warps) {
    const Piece pc = pieces[p];
    const Obj o = objs[pc.obj];
    const std::uint64_t begin = std::uint64_t{pc.first_block} * xxh3::kBlockBytes;
    const std::uint64_t piece_end = begin + kPieceBlocks * xxh3::kBlockBytes;
    const std::uint64_t end = piece_end < o.len ? piece_end : o.len;
    // dst == nullptr: hash only (the copy engines moved the bytes); warp-uniform.
    const bool store = o.dst != nullptr;
    if ((o.flags & KernelLane::kVector) == 0) {  // unaligned: bytes, and the CPU hashes
      if (store)
        for (std::uint64_t i = begin + lane; i < end; i += 32) o.dst[i] = o.src[i];
      continue;
    }
    const bool hash = (o.flags & KernelLane::kHash) != 0;
    const std::uint64_t vec_end = end & ~std::uint64_t{15};
    for (std::uint64_t base = begin; base < end; base += kRoundBytes) {
      uint4 v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const std::uint64_t off = base + 512 * j + 16 * lane;
        v[j] = off < vec_end ? __ldcs(reinterpret_cast<const uint4*>(o.src + off)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const std::uint64_t off = base + 512 * j + 16 * lane;
        if (store && off < vec_end) __stcs(reinterpret_cast<uint4*>(o.dst + off), v[j]);
      }
      if (!hash) continue;
#pragma unroll
      for (int blk = 0; blk < 4; ++blk) {
        const std::uint64_t b = base / xxh3::kBlockBytes + blk;
        if (b * xxh3::kBlockBytes >= end) break;  // warp-uniform
        // A counted stripe ends before len, so its vectors were loaded (off < vec_end).
        const unsigned stripes = xxh3::stripes_in_block(o.len, b);
        std::uint64_t even = 0, odd = 0;
        if (s0 < stripes) xxh3::add_part(even, odd, lo64(v[2 * blk]), hi64(v[2 * blk]), k00, k01);
        if (s1 < stripes) xxh3::add_part(even, odd, lo64(v[2 * blk + 1]), hi64(v[2 * blk + 1]), k10, k11);
        // Sum over the 8 lanes of each pair q (lanes q, q+4, ..., q+28).
#pragma unroll
        for (unsigned m = 4; m < 32; m <<= 1) {
          even += __shfl_xor_sync(0xffffffffu, even, m);
          odd += __shfl_xor_sync(0xffffffffu, odd, m);
        }
        if (lane < 4) contrib[(std::uint64_t{o.scratch} + b) * 4 + lane] = make_ulonglong2(even, odd);
      }
    }
    if (end != o.len) continue;
    // The segment's tail: bytes past the last whole 16, then XXH3's last stripe
    // (len - 64, which may start inside an earlier piece: read from src, never written).
    if (store)
      for (std::uint64_t i = vec_end + lane; i < end; i += 32) o.dst[i] = o.src[i];
    if (hash && lane < 4) {
      std::uint64_t even = 0, odd = 0;
      xxh3::last_stripe_part(o.src + o.len - xxh3::kStripeBytes, lane, keys, even, odd);
      contrib[(std::uint64_t{o.scratch} + xxh3::scrambled_blocks(o.len) + 1) * 4 + lane] = make_ulonglong2(even, odd);
    }
  }
}

// The serial part of XXH3 per segment; runs after copy_pieces on the same stream.
// Eight threads per segment, one per accumulator (xxh3::fold_accumulator), in
// one aligned group of eight lanes of a warp; they meet for the final mix by
// shuffles within the group.
constexpr unsigned kFoldThreads = 8;
__global__ void finish_hashes(const Obj* objs, std::uint32_t n, const std::uint64_t* contrib, std::uint64_t* sums,
                              const __grid_constant__ xxh3::Keys keys) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned obj = t / kFoldThreads, i = t % kFoldThreads;
  if (obj >= n) return;  // the whole group leaves together
  const Obj o = objs[obj];
  if ((o.flags & KernelLane::kHash) == 0) return;  // likewise
  const unsigned group = 0xFFu << (threadIdx.x & 31u & ~(kFoldThreads - 1));
  const std::uint64_t acc = xxh3::fold_accumulator(contrib + 8 * std::uint64_t{o.scratch}, o.len, i, keys);
  const std::uint64_t partner = __shfl_xor_sync(group, acc, 1);  // acc[i ^ 1]
  std::uint64_t mixed = i % 2 == 0 ? xxh3::mix_pair(acc, partner, keys.merge[i], keys.merge[i + 1]) : 0;
  mixed += __shfl_xor_sync(group, mixed, 2);
  mixed += __shfl_xor_sync(group, mixed, 4);
  if (i == 0) sums[obj] = xxh3::finish(mixed, o.len);
}

std::string cuda_error(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace

KernelLane::KernelLane(int device, std::size_t max_segment_bytes, const std::uint8_t* xxh3_secret) : device_(device) {
  if (xxh3_secret == nullptr) throw Error("the copy kernel needs XXH3's secret");
  keys_ = xxh3::make_keys(xxh3_secret);
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  // Enough for one segment of max_segment_bytes or many small ones per round;
  // run() splits a call that needs more into several rounds.
  max_objs_ = 4096;
  const std::size_t blocks = max_segment_bytes / xxh3::kBlockBytes + 1;
  max_pieces_ = blocks / kPieceBlocks + max_objs_;
  max_entries_ = blocks + 2 * max_objs_;
  const std::size_t table = max_objs_ * sizeof(Obj) + max_pieces_ * sizeof(Piece);
  FERRY_CUDA_CHECK(cudaHostAlloc(&table_h_, table, cudaHostAllocPortable));
  FERRY_CUDA_CHECK(cudaMalloc(&table_d_, table));
  FERRY_CUDA_CHECK(cudaMalloc(&contrib_d_, max_entries_ * 8 * sizeof(std::uint64_t)));
  FERRY_CUDA_CHECK(cudaMalloc(&sums_d_, max_objs_ * sizeof(std::uint64_t)));
  FERRY_CUDA_CHECK(cudaHostAlloc(&sums_h_, max_objs_ * sizeof(std::uint64_t), cudaHostAllocPortable));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  objs_.reserve(max_objs_);
  pieces_.reserve(max_pieces_);
}

KernelLane::~KernelLane() {
  cudaSetDevice(device_);
  cudaFreeHost(table_h_);
  cudaFree(table_d_);
  cudaFree(contrib_d_);
  cudaFree(sums_d_);
  cudaFreeHost(sums_h_);
  cudaEventDestroy(done_);
}

XferStatus KernelLane::launch(cudaStream_t stream, Fault& fault) noexcept {
  const std::size_t obj_bytes = objs_.size() * sizeof(Obj), piece_bytes = pieces_.size() * sizeof(Piece);
  std::memcpy(table_h_, objs_.data(), obj_bytes);
  std::memcpy(table_h_ + obj_bytes, pieces_.data(), piece_bytes);
  cudaError_t err = cudaMemcpyAsync(table_d_, table_h_, obj_bytes + piece_bytes, cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) return fault.raise(XferStatus::IoError, cuda_error("copy kernel: descriptor upload failed", err));
  const auto* objs_d = reinterpret_cast<const Obj*>(table_d_);
  const auto* pieces_d = reinterpret_cast<const Piece*>(table_d_ + obj_bytes);
  const auto n_pieces = static_cast<std::uint32_t>(pieces_.size());
  const auto n_objs = static_cast<std::uint32_t>(objs_.size());
  // A warp per piece, up to two CTAs of 8 warps per SM per lane: the agent's
  // lanes run their kernels side by side and share the GPU.
  const unsigned ctas = static_cast<unsigned>(
      std::min<std::size_t>((n_pieces + kThreads / 32 - 1) / (kThreads / 32), 2 * static_cast<std::size_t>(sm_count_)));
  if (n_pieces > 0)
    copy_pieces<<<ctas, kThreads, 0, stream>>>(objs_d, pieces_d, n_pieces, reinterpret_cast<ulonglong2*>(contrib_d_),
                                                keys_);
  finish_hashes<<<(n_objs * kFoldThreads + 127) / 128, 128, 0, stream>>>(objs_d, n_objs, contrib_d_, sums_d_, keys_);
  err = cudaGetLastError();
  if (err == cudaSuccess)
    err = cudaMemcpyAsync(sums_h_, sums_d_, n_objs * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaEventRecord(done_, stream);
  if (err != cudaSuccess) {
    // A later launch or the copy-back failed to enqueue, but copy_pieces may be
    // running: wait for it, since the caller frees the pool ranges it touches.
    cudaStreamSynchronize(stream);
    return fault.raise(XferStatus::IoError, cuda_error("copy kernel failed", err));
  }
  return XferStatus::Ok;
}

void KernelLane::take_round(std::size_t first) noexcept {
  for (std::size_t k = 0; k < objs_.size(); ++k) {
    hashed_[first + k] = (objs_[k].flags & kHash) != 0 ? 1 : 0;
    sums_[first + k] = hashed_[first + k] != 0 ? sums_h_[k] : 0;
  }
}

XferStatus KernelLane::start(cudaStream_t stream, std::span<const Segment> segs, bool to_device, bool hash_only,
                             Fault& fault) noexcept {
  if (in_flight_)
    return fault.raise(XferStatus::IoError, "copy kernel: start() before the previous round was collected");
  sums_.assign(segs.size(), 0);
  hashed_.assign(segs.size(), 0);
  last_round_first_ = 0;
  std::size_t i = 0;
  while (i < segs.size()) {
    const std::size_t first = i;
    objs_.clear();
    pieces_.clear();
    std::size_t entries = 0;
    for (; i < segs.size(); ++i) {
      const Segment& s = segs[i];
      const std::uint64_t blocks = (s.len + xxh3::kBlockBytes - 1) / xxh3::kBlockBytes;
      const std::size_t n_pieces = (blocks + kPieceBlocks - 1) / kPieceBlocks;
      // Hash only: read the bytes where they are in device memory (the copy
      // engines' destination for a pull, their source for a push).
      const auto* src = static_cast<const std::uint8_t*>(hash_only   ? (to_device ? s.dst : s.src)
                                                          : to_device ? device_view(s.src)
                                                                      : s.src);
      auto* dst = hash_only ? nullptr : static_cast<std::uint8_t*>(to_device ? s.dst : device_view(s.dst));
      std::uint32_t flags = 0;
      if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15u) == 0) {
        flags = kVector;
        if (s.len >= xxh3::kMinLen) flags |= kHash;
      }
      const std::size_t need = (flags & kHash) != 0 ? xxh3::scrambled_blocks(s.len) + 2 : 0;
      if (objs_.size() == max_objs_ || pieces_.size() + n_pieces > max_pieces_ || entries + need > max_entries_) {
        if (objs_.empty())
          return fault.raise(XferStatus::IoError, "copy kernel: a segment of " + std::to_string(s.len) +
                                                      " bytes exceeds the lane's buffers");
        break;
      }
      const auto index = static_cast<std::uint32_t>(objs_.size());
      objs_.push_back({src, dst, s.len, static_cast<std::uint32_t>(entries), flags});
      entries += need;
      for (std::uint64_t b = 0; b < blocks; b += kPieceBlocks) pieces_.push_back({index, static_cast<std::uint32_t>(b)});
    }
    if (const XferStatus st = launch(stream, fault); st != XferStatus::Ok) return st;
    if (i == segs.size()) break;  // the last round stays in flight
    // An earlier round: the buffers are needed again, so it must finish first.
    const cudaError_t err = cudaEventSynchronize(done_);
    if (err != cudaSuccess) return fault.raise(XferStatus::IoError, cuda_error("copy kernel failed", err));
    take_round(first);
    last_round_first_ = i;
  }
  in_flight_ = true;
  return XferStatus::Ok;
}

XferStatus KernelLane::collect(std::uint64_t* sums, std::uint8_t* hashed, Fault& fault) noexcept {
  if (!in_flight_) return fault.raise(XferStatus::IoError, "copy kernel: collect() without a round in flight");
  in_flight_ = false;
  if (sums_.empty()) return XferStatus::Ok;  // nothing was queued
  const cudaError_t err = cudaEventSynchronize(done_);
  if (err != cudaSuccess) return fault.raise(XferStatus::IoError, cuda_error("copy kernel failed", err));
  take_round(last_round_first_);
  std::copy(sums_.begin(), sums_.end(), sums);
  std::copy(hashed_.begin(), hashed_.end(), hashed);
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::gpu::cuda
