#pragma once
// The file tier's spec (docs/xfer-tiers.md):
//
//   file:/var/lib/ferry                        a directory, unbounded, buffered, queue depth 32
//   file:/mnt/nvme/kv,direct,capacity=10GiB,qd=64,fsync
//   file:/mnt/nvme/kv,pack=256KiB              objects up to 256 KiB go into pack files (default
//                                              1MiB; pack=0: a file per object)
//
// and its kind for the registry (ferry/xfer/tier_registry.h).

#include <string_view>

#include "ferry/xfer/tier_registry.h"
#include "xfer/store/file/file_tier_options.h"

namespace ferry::xfer::store {

// Throws ferry::Error naming the spec and what is wrong.
FileTierOptions parse_file_tier_spec(std::string_view spec);

TierKind file_tier_kind();

}  // namespace ferry::xfer::store
