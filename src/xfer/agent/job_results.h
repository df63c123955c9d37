#pragma once
// The API edge of a transfer: the mover leaves each descriptor a status, a size
// and a tier index, and the job one Fault (ferry/xfer/fault.h); the reply names tiers
// and explains failures. Made here, once per job, not on the data path.
//
// A failed descriptor's text: the Fault's detail when the first failure was
// its key's, or (a whole batch's failure, no key) when it failed with the same
// status; otherwise a short phrase naming its key and status.
//
// Keys in the texts are the application's: the session's key namespace
// (`ns`, "u1000/" for a uid's own keys) is taken off them.

#include <span>
#include <string>
#include <string_view>

#include "xfer/agent/mover.h"

namespace ferry::xfer::agent {

void describe_results(Job& job, std::span<const std::string> tier_names, std::string_view ns = {});

}  // namespace ferry::xfer::agent
