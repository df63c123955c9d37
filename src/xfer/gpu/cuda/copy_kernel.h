#pragma once
// The agent's third copy method (--copy kernel): a gather/scatter kernel that
// moves a batch of segments between device memory and mapped pinned host memory
// with SM loads and stores, and computes each segment's XXH3-64 on the bytes it
// moves (store/xxh3_parts.h), so the CPU does not read them again.
//
//   copy_pieces   one warp per 16 KiB piece of a segment: 4 KiB rounds of eight
//                 16-byte loads per lane in flight, then the stores; each 1 KiB
//                 block's XXH3 contribution (8 x u64) goes to a scratch array
//   finish_hashes eight threads per segment: the serial scramble over its blocks'
//                 contributions, then the final mix -> the segment's hash
//
// It also runs hash only (dst null), on bytes the copy engines have moved: for
// blocks of 1 MiB and more the engines copy faster than the kernel, and reading
// the block back from device memory costs the SMs next to nothing.
//
// Per lane, buffers sized at construction for segments up to max_segment_bytes:
// a pinned descriptor table copied to the device per call, the contributions,
// and the hashes (device, copied back to pinned memory). A Gpu::Lanes lane has
// two of these on its one stream, so that it can queue a batch's kernels while
// the batch before is still in flight (start, then collect).

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "ferry/xfer/fault.h"
#include "xfer/checksum/xxh3_parts.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::gpu::cuda {

class KernelLane {
 public:
  // Throws ferry::Error when the buffers cannot be allocated.
  KernelLane(int device, std::size_t max_segment_bytes, const std::uint8_t* xxh3_secret);
  ~KernelLane();
  KernelLane(const KernelLane&) = delete;
  KernelLane& operator=(const KernelLane&) = delete;

  // Gpu::Lanes::start_hashed on `stream` (the lane's): queues the copies and
  // hashes of segs and returns; with hash_only, only the hashes, read from the
  // segments' device side (the caller queued their copies before). A call that
  // needs several rounds of this lane's buffers runs all but the last to
  // completion first. Ok, or IoError (raised) when a round fails (nothing is then
  // left in flight).
  [[nodiscard]] XferStatus start(cudaStream_t stream, std::span<const Segment> segs, bool to_device,
                                 bool hash_only, Fault& fault) noexcept;
  // Waits for what start() queued; sums[i], hashed[i] for its segment i (as
  // Gpu::Lanes::copy_hashed describes). Ok, or IoError (raised).
  [[nodiscard]] XferStatus collect(std::uint64_t* sums, std::uint8_t* hashed, Fault& fault) noexcept;

  // Device-side descriptors (the layout the kernels read; 32 bytes each).
  struct Obj {
    const std::uint8_t* src;
    std::uint8_t* dst;
    std::uint64_t len;
    std::uint32_t scratch;  // first contribution entry (8 x u64 each) of this segment
    std::uint32_t flags;    // kVector, kHash
  };
  struct Piece {
    std::uint32_t obj;
    std::uint32_t first_block;  // 1 KiB blocks into the segment
  };
  static constexpr std::uint32_t kVector = 1;  // src and dst 16-byte aligned: 16-byte loads and stores
  static constexpr std::uint32_t kHash = 2;    // also hash (needs kVector and len > 240)

 private:
  // Queues the round in objs_/pieces_ and the copy-back of its hashes, then
  // records done_. IoError (raised) when a launch fails (after waiting for the
  // stream: a kernel may be running on the caller's memory).
  [[nodiscard]] XferStatus launch(cudaStream_t stream, Fault& fault) noexcept;
  // The round's hashes, once done_ has passed, into sums_/hashed_ from `first` on.
  void take_round(std::size_t first) noexcept;

  int device_;
  int sm_count_ = 0;
  std::size_t max_objs_ = 0, max_pieces_ = 0, max_entries_ = 0;
  xxh3::Keys keys_{};
  std::uint8_t* table_h_ = nullptr;  // pinned: Obj[n] then Piece[m], as sent
  std::uint8_t* table_d_ = nullptr;
  std::uint64_t* contrib_d_ = nullptr;
  std::uint64_t* sums_d_ = nullptr;
  std::uint64_t* sums_h_ = nullptr;  // pinned
  cudaEvent_t done_ = nullptr;       // recorded after a round's copy-back
  std::vector<Obj> objs_;            // the round being built (or in flight)
  std::vector<Piece> pieces_;
  // Per segment of the call in flight: its hash and whether the kernel made it.
  std::vector<std::uint64_t> sums_;
  std::vector<std::uint8_t> hashed_;
  std::size_t last_round_first_ = 0;  // the segment index where the in-flight round starts
  bool in_flight_ = false;
};

}  // namespace ferry::xfer::gpu::cuda
