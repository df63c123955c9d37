#pragma once
// The API edge of a transfer: the mover leaves each descriptor a status, a size
// and a tier index, and the job one Fault (base/fault.h); the reply names tiers
// and explains failures. Made here, once per job, not on the data path.
//
// A failed descriptor's text: the Fault's detail when the first failure was
// its key's, or (a whole batch's failure, no key) when it failed with the same
// status; otherwise a short phrase naming its key and status.

#include <span>
#include <string>

#include "xfer/agent/mover.h"

namespace ferry::xfer::agent {

void describe_results(Job& job, std::span<const std::string> tier_names);

}  // namespace ferry::xfer::agent
