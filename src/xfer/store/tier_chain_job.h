#pragma once
// The tier chain's private types, shared by tier_chain.cpp and
// tier_chain_shared.cpp.

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>

#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {

// One object on its way into the chain: a new put (item set, source -1) or a
// victim moving down from tier `source`.
struct TierChain::Job {
  std::string_view key;
  std::size_t stripe = 0;
  ByteView data;
  std::uint64_t checksum = 0;
  PutItem* item = nullptr;
  int source = -1;
  int placed = -1;
  XferStatus hard = XferStatus::Ok;  // the first refusal that was not NoSpace
  std::string errors;                // every tier's answer, for the final message
  bool failed = false;               // an older copy stayed: the job failed (raised where it did)
};

// The stripes this thread holds: its batch's (locked in order) and its victims'
// (try-locked). And the tiers a removal found Unavailable in this call: the
// call's other keys fail at once rather than each waiting for Redis's connect
// timeout (the first one raised why).
struct TierChain::Op {
  explicit Op(Fault& f) : fault(f) {}
  Fault& fault;  // the put call's
  std::bitset<kStripes> held;
  std::uint32_t unavailable = 0;
};

}  // namespace ferry::xfer::store
