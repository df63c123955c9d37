#include "xfer/gpu/leaf_segments.h"

#include <algorithm>

#include "ferry/xfer/checksum.h"

namespace ferry::xfer::gpu {


void append_leaves(const Segment& seg, std::vector<Segment>* segs) {
  auto* dst = static_cast<std::uint8_t*>(seg.dst);
  const auto* src = static_cast<const std::uint8_t*>(seg.src);
  std::size_t at = 0;
  do {
    const std::size_t len = std::min(kChecksumLeafBytes, seg.len - at);
    segs->push_back({dst + at, src + at, len});
    at += len;
  } while (at < seg.len);
}

std::optional<std::uint64_t> checksum_from_leaves(std::span<const std::uint64_t> sums,
                                                  std::span<const std::uint8_t> hashed, std::size_t first,
                                                  std::uint64_t len) {
  const std::size_t leaves = len <= kChecksumLeafBytes ? 1 : (len + kChecksumLeafBytes - 1) / kChecksumLeafBytes;
  if (first + leaves > sums.size() || first + leaves > hashed.size()) return std::nullopt;
  for (std::size_t i = first; i < first + leaves; ++i)
    if (hashed[i] == 0) return std::nullopt;
  if (leaves == 1) return sums[first];
  return combine_leaf_sums(sums.subspan(first, leaves));
}

}  // namespace ferry::xfer::gpu
