#pragma once
// The agent's third copy method (--copy kernel): a gather/scatter kernel that
// moves a batch of segments between device memory and mapped pinned host memory
// with SM loads and stores, and computes each segment's XXH3-64 on the bytes it
// moves (store/xxh3_parts.h), so the CPU does not read them again.
//
//   copy_pieces   one warp per 16 KiB piece of a segment: 4 KiB rounds of eight
//                 16-byte loads per lane in flight, then the stores; each 1 KiB
//                 block's XXH3 contribution (8 x u64) goes to a scratch array
//   finish_hashes one thread per segment: the serial scramble over its blocks'
//                 contributions, then the final mix -> the segment's hash
//
// Per lane, buffers sized at construction for segments up to max_segment_bytes:
// a pinned descriptor table copied to the device per call, the contributions,
// and the hashes (device, copied back to pinned memory).

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "xfer/gpu.h"
#include "xfer/store/xxh3_parts.h"

namespace ferry::xfer::gpu::cuda {

class KernelLane {
 public:
  // Throws ferry::Error when the buffers cannot be allocated.
  KernelLane(int device, std::size_t max_segment_bytes, const std::uint8_t* xxh3_secret);
  ~KernelLane();
  KernelLane(const KernelLane&) = delete;
  KernelLane& operator=(const KernelLane&) = delete;

  // Gpu::Lanes::copy_hashed on `stream` (the lane's): copies, hashes, waits.
  bool run(cudaStream_t stream, std::span<const Segment> segs, bool to_device, std::uint64_t* sums,
           std::uint8_t* hashed, std::string* error) noexcept;

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
  bool launch(cudaStream_t stream, std::string* error) noexcept;

  int device_;
  int sm_count_ = 0;
  std::size_t max_objs_ = 0, max_pieces_ = 0, max_entries_ = 0;
  store::xxh3::Keys keys_{};
  std::uint8_t* table_h_ = nullptr;  // pinned: Obj[n] then Piece[m], as sent
  std::uint8_t* table_d_ = nullptr;
  std::uint64_t* contrib_d_ = nullptr;
  std::uint64_t* sums_d_ = nullptr;
  std::uint64_t* sums_h_ = nullptr;  // pinned
  std::vector<Obj> objs_;            // the round being built
  std::vector<Piece> pieces_;
};

}  // namespace ferry::xfer::gpu::cuda
