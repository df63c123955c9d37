#pragma once
// The route applications' verification, shared by Ferry's versions and the
// peer libraries' (bench/route/peers/), so every library's run is checked by
// the same code: each returns whether every rank's result is right, the summary
// line's detail and the parameters for the JSON report. Collective over comm.

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "reduce.h"
#include "rng.h"

namespace ferry::route::bench {

struct Verdict {
  bool ok = false;
  std::string detail;  // for the summary line
  std::string params;  // a JSON object of the app's parameters
};

// histogram: every rank regenerates every rank's seeded stream and recounts the
// slots it owns. `extra_params` is more JSON members (", \"key\": value").
inline Verdict check_histogram(MPI_Comm comm, const std::vector<std::uint64_t>& counts, std::uint64_t seed,
                               int me, int ranks, std::uint64_t updates, std::uint64_t slots_per_rank,
                               std::uint64_t sink, const std::string& extra_params = "") {
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t base = slots_per_rank * static_cast<std::uint64_t>(me);
  std::vector<std::uint64_t> expect(slots_per_rank, 0);
  for (int r = 0; r < ranks; ++r) {
    Rng replay(seed, static_cast<std::uint64_t>(r));
    for (std::uint64_t i = 0; i < updates; ++i) {
      const std::uint64_t slot = replay.next() % total_slots;
      if (slot / slots_per_rank == static_cast<std::uint64_t>(me)) ++expect[slot - base];
    }
  }
  std::uint64_t wrong = 0, local = 0;
  for (std::uint64_t s = 0; s < slots_per_rank; ++s) {
    wrong += counts[s] != expect[s];
    local += counts[s];
  }
  const std::uint64_t total = sum_u64(comm, local), bad = sum_u64(comm, wrong);
  Verdict v;
  v.ok = bad == 0 && total == updates * static_cast<std::uint64_t>(ranks);
  char text[160];
  std::snprintf(text, sizeof text, "%llu updates counted, %llu slots wrong (sink %llu)",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(bad),
                static_cast<unsigned long long>(sink & 1));
  v.detail = text;
  std::snprintf(text, sizeof text, R"({"updates_per_rank": %llu, "slots_per_rank": %llu)",
                static_cast<unsigned long long>(updates), static_cast<unsigned long long>(slots_per_rank));
  v.params = std::string(text) + extra_params + "}";
  return v;
}

// index-gather: the table's value at a global index (a pure function of it, so
// a requester can check every reply).
inline std::uint64_t table_value(std::uint64_t seed, std::uint64_t index) {
  return mix(index ^ (seed << 40));
}

// index-gather: got[i] must be the value at wanted[i], and every request replied to once.
inline Verdict check_index_gather(MPI_Comm comm, const std::vector<std::uint64_t>& wanted,
                                  const std::vector<std::uint64_t>& got, std::uint64_t replies,
                                  std::uint64_t seed, std::uint64_t entries_per_rank, std::uint64_t sink) {
  const std::uint64_t requests = wanted.size();
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < requests; ++i) wrong += got[i] != table_value(seed, wanted[i]);
  const std::uint64_t bad = sum_u64(comm, wrong + (replies != requests ? 1 : 0));
  Verdict v;
  v.ok = bad == 0;
  char text[160];
  std::snprintf(text, sizeof text, "%llu replies checked, %llu wrong (sink %llu)",
                static_cast<unsigned long long>(sum_u64(comm, replies)), static_cast<unsigned long long>(bad),
                static_cast<unsigned long long>(sink & 1));
  v.detail = text;
  std::snprintf(text, sizeof text, R"({"requests_per_rank": %llu, "entries_per_rank": %llu})",
                static_cast<unsigned long long>(requests), static_cast<unsigned long long>(entries_per_rank));
  v.params = text;
  return v;
}

// randperm: every value was sent to its owner, which counted it in `seen`; each
// must have arrived exactly once, and the ranks' permutations hold every item.
inline Verdict check_randperm(MPI_Comm comm, const std::vector<std::uint32_t>& seen, std::uint64_t placed,
                              std::uint64_t rounds, std::uint64_t items_per_rank, int ranks,
                              std::uint64_t sink) {
  std::uint64_t wrong = 0;
  for (std::uint32_t c : seen) wrong += c != 1;
  const std::uint64_t bad = sum_u64(comm, wrong);
  const std::uint64_t total = sum_u64(comm, placed);
  Verdict v;
  v.ok = bad == 0 && total == items_per_rank * static_cast<std::uint64_t>(ranks);
  char text[200];
  std::snprintf(text, sizeof text,
                "permutation of %llu values in %llu rounds, %llu values not seen exactly once (sink %llu)",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(rounds),
                static_cast<unsigned long long>(bad), static_cast<unsigned long long>(sink & 1));
  v.detail = text;
  std::snprintf(text, sizeof text, R"({"items_per_rank": %llu, "rounds": %llu})",
                static_cast<unsigned long long>(items_per_rank), static_cast<unsigned long long>(rounds));
  v.params = text;
  return v;
}

}  // namespace ferry::route::bench
