#pragma once
// The dram tier's spec, "dram:<size>" (docs/xfer-tiers.md), and its kind for
// the registry (ferry/xfer/tier_registry.h).

#include <cstdint>
#include <string_view>

#include "ferry/xfer/tier_registry.h"

namespace ferry::xfer::store {

// The capacity a spec gives. Throws ferry::Error.
std::uint64_t parse_dram_tier_spec(std::string_view spec);

TierKind dram_tier_kind();

}  // namespace ferry::xfer::store
