#include "xfer/store/dram/dram_tier_spec.h"

#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/spec_parse.h"

namespace ferry::xfer::store {
namespace {

constexpr std::string_view kUsage = "dram:<size>";

}  // namespace

std::uint64_t parse_dram_tier_spec(std::string_view spec) {
  const SpecReader r(spec, kUsage);
  if (spec.substr(0, 5) != "dram:") r.fail("not a dram tier");
  if (spec.size() == 5) r.fail("no capacity after 'dram:'");
  return r.size(spec.substr(5), "capacity");
}

TierKind dram_tier_kind() {
  return {"dram", std::string(kUsage),
          [](std::string_view spec) { return std::make_unique<DramTier>(parse_dram_tier_spec(spec), std::string(spec)); }};
}

}  // namespace ferry::xfer::store
