#pragma once
// The copy kernel hashes each segment it is given with one serial XXH3 fold
// (cuda/copy_kernel.h), which for a large block runs long after its copy ends.
// So a block larger than one checksum leaf (ferry/xfer/checksum.h) goes to the kernel
// as its leaves, which it hashes side by side, and the block's checksum is made
// from theirs on the CPU (a hash of 8 bytes per 64 KiB).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "xfer/gpu/gpu.h"

namespace ferry::xfer::gpu {

// Appends seg cut at leaf boundaries (seg itself when it fits in one leaf).
void append_leaves(const Segment& seg, std::vector<Segment>* segs);

// The checksum of a block of len bytes whose leaves are segments first,
// first + 1, ... of a batch the kernel hashed (sums and hashed as
// Lanes::collect_hashed fills them); nullopt when the kernel left one of them
// unhashed (a leaf of 240 bytes or less, unaligned memory): the caller then
// hashes the block on the CPU.
std::optional<std::uint64_t> checksum_from_leaves(std::span<const std::uint64_t> sums,
                                                  std::span<const std::uint8_t> hashed, std::size_t first,
                                                  std::uint64_t len);

}  // namespace ferry::xfer::gpu
