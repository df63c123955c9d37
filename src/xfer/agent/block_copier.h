#pragma once
// How the agent moves blocks between an application's memory and host memory
// (a staging slot or a dram tier's pool range), and computes or checks their
// checksums on the way: the copy and hash strategy, apart from the mover's
// queueing and storage.
//
//   host (memfd) blocks            memcpy, hashed by the CPU
//   device blocks, by the kernel   the copy kernel moves them and hashes each
//                                  leaf (checksum/leaf_segments.h), or, from
//                                  engines_from on, the copy engines move them
//                                  and the kernel hashes them in device memory
//   device blocks, by the engines  cudaMemcpyBatchAsync in waves of pieces, the
//                                  CPU hashing each wave behind the next one's DMA
//
// Host blocks the agent reaches by copy calls (remote_memory.h: another
// process's memory, a shared file) move by those calls instead of memcpy,
// hashed the same way.
//
// Every call is per lane (a CUDA stream, one thread at a time) and per batch:
// a batch's blocks all move one Way (the mover cuts batches where it changes).
// Errors follow ferry/xfer/fault.h: raised into the job's Fault where they start.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferry/xfer/fault.h"
#include "ferry/xfer/types.h"
#include "xfer/agent/block_ref.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::agent {

struct CopyOptions {
  bool gpu = false;  // CUDA copy lanes; without, memcpy only
  int device = 0;
  gpu::CopyMethod method = gpu::CopyMethod::Auto;  // --copy auto | batch | loop | kernel
  // --copy auto: blocks below this go by the copy kernel, the rest by batch.
  std::size_t kernel_below = 64u << 20;
  std::size_t kernel_below_pull = 64u << 20;  // the same for pulls (reads)
  // --copy auto, blocks the kernel hashes: from this size on (0: never) the copy
  // engines copy them and the kernel hashes them in device memory.
  std::size_t engines_from = 1u << 20;
};

class BlockCopier {
 public:
  // How a block moves; a batch moves one way.
  struct Way {
    bool kernel = false;  // device blocks by the copy kernel (else by the copy engines)
    gpu::HashedCopy how = gpu::HashedCopy::Fused;
    bool operator==(const Way&) const = default;
  };

  // A batch between its start and its finish: a lane keeps two in flight
  // (gpu::Lanes::kHashedSlots), so that the GPU has the next copy queued while
  // the lane's thread does the last one's bookkeeping.
  struct Flight {
    int slot = 0;          // the lane's kernel buffer set
    Way way;
    bool started = false;  // a kernel copy is in flight: finish collects it
    std::vector<gpu::Segment> segs;   // the device blocks' copies (by the kernel: their leaves)
    std::vector<std::size_t> seg_of;  // block -> its (first) segment, or kNoSeg
    std::vector<std::uint64_t> gpu_sums;
    std::vector<std::uint8_t> hashed;
    static constexpr std::size_t kNoSeg = ~std::size_t{0};
  };

  // Throws ferry::Error (set-up) when the GPU lanes cannot be made.
  BlockCopier(const CopyOptions& options, int lanes, std::size_t slot_bytes);
  ~BlockCopier();
  BlockCopier(const BlockCopier&) = delete;
  BlockCopier& operator=(const BlockCopier&) = delete;

  Way way(XferOp op, std::size_t len) const noexcept;
  bool gpu() const noexcept { return lanes_ != nullptr; }
  std::string describe() const;

  // Push: application -> host, and each block's checksum into sums[k]. start
  // queues the kernel's copy (host blocks are copied and hashed at once); a
  // batch by the engines moves whole in finish.
  XferStatus start_push(int lane, Flight& f, std::span<const BlockRef> blocks, std::span<std::uint64_t> sums,
                        Fault& fault) noexcept;
  XferStatus finish_push(int lane, Flight& f, std::span<const BlockRef> blocks, std::span<std::uint64_t> sums,
                         Fault& fault) noexcept;

  // Pull: host -> application. finish computes sums[k] of the blocks whose
  // verify[k] is set (as the kernel hashed them, or by the CPU while the
  // engines' DMA runs), for the caller to check against the stored ones.
  XferStatus start_pull(int lane, Flight& f, std::span<const BlockRef> blocks, Fault& fault) noexcept;
  XferStatus finish_pull(int lane, Flight& f, std::span<const BlockRef> blocks, std::span<const std::uint8_t> verify,
                         std::span<std::uint64_t> sums, Fault& fault) noexcept;

 private:
  XferStatus push_by_engines(int lane, std::span<const BlockRef> blocks, std::span<std::uint64_t> sums,
                             Fault& fault) noexcept;

  CopyOptions options_;
  std::unique_ptr<gpu::Lanes> lanes_;
};

}  // namespace ferry::xfer::agent
