#pragma once
// Tier kinds by name. A tier spec ("dram:8GiB", "file:/var/lib/ferry,direct",
// "redis://cache:6379") starts with its kind's scheme, the text before the
// first ':'; the agent (AgentServiceOptions::tiers, `ferry agent --tier`) makes
// each tier through the kind registered under that scheme.
//
// Ferry's own kinds are registered before the first lookup: dram, file, redis
// and redis-cluster (docs/xfer-tiers.md). An application adds its own before it
// starts an agent:
//
//   ferry::xfer::store::register_tier({
//       .scheme = "scratch",
//       .usage = "scratch:<size>",
//       .make = [](std::string_view spec) { return std::make_unique<ScratchTier>(spec); },
//   });
//   AgentService agent({.tiers = {"scratch:1GiB", "file:/var/lib/ferry"}});
//
// The tier implements ferry/xfer/tier.h's contract. Thread-safe.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/xfer/tier.h"

namespace ferry::xfer::store {

struct TierKind {
  // The spec's first word: a letter, then letters, digits, '+', '-' or '.'
  // (a URI scheme). Lower case.
  std::string scheme;
  // The spec's form, shown by errors and help: "dram:<size>".
  std::string usage;
  // Makes a tier from the whole spec. Throws ferry::Error naming the spec and
  // what is wrong with it, or why the tier cannot be opened.
  std::function<std::unique_ptr<Tier>(std::string_view spec)> make;
};

// Adds a kind. Throws ferry::Error when the scheme is malformed or taken (a
// built-in kind cannot be replaced), or when usage or make is missing.
void register_tier(TierKind kind);

// Every registered kind, in the order registered (built-ins first).
std::vector<TierKind> registered_tiers();

// The tier a spec names. Throws ferry::Error for a spec of no registered kind
// (naming the accepted forms), and whatever the kind's make throws.
std::unique_ptr<Tier> make_tier(std::string_view spec);

}  // namespace ferry::xfer::store
