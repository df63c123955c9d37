// histogram on bale's conveyors: Ferry's bench/route/histogram.cpp in the
// conveyor idiom (bale's histo_conveyor): push until the conveyor refuses, pull
// what arrived, advance, until convey_advance() reports DONE. Same flags,
// streams and exact verification: each rank regenerates every rank's seeded
// stream and recounts its own slots.

#include <cstdio>
#include <vector>

#include "convey_peer.h"
#include "peer_common.h"

using namespace ferry::route::bench;
using namespace ferry::route::bench::peers;

namespace {
struct Update {
  std::uint64_t slot;  // global slot index (the payload, as Ferry's Update)
};

int run(int argc, char** argv) {
  const ConveyMpi mpi(argc, argv);
  PeerOptions common;
  std::uint64_t updates = 100000, slots_per_rank = 1 << 16;
  CLI::App cli{"histogram (conveyors): fire-and-forget updates of a distributed table"};
  add_common_flags(cli, common);
  cli.add_option("--updates", updates, "updates per rank");
  cli.add_option("--slots-per-rank", slots_per_rank, "table slots per rank")->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, mpi.rank()); rc >= 0) return rc;

  const int me = mpi.rank(), ranks = mpi.size();
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t base = slots_per_rank * static_cast<std::uint64_t>(me);
  std::vector<std::uint64_t> counts(slots_per_rank, 0);
  convey_t* conveyor = convey_or_abort(convey_new(SIZE_MAX, 0, nullptr, convey_opt_SCATTER), "histogram");
  convey_check(conveyor, convey_begin(conveyor, sizeof(Update), alignof(Update)), "convey_begin");
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("histogram", "convey", common, work);
  const std::string config = convey_config();

  std::uint64_t received = 0;
  bench.start();
  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  std::uint64_t i = 0;
  Update next{};
  bool drawn = false;  // `next` holds update i, not yet accepted by the conveyor
  while (convey_advance(conveyor, i == updates)) {
    for (; i < updates; ++i) {
      if (!drawn) {
        next.slot = rng.next() % total_slots;
        work.run();  // the application's own memory traffic for this update
        drawn = true;
      }
      if (!convey_push(conveyor, &next, static_cast<int64_t>(next.slot / slots_per_rank))) break;
      drawn = false;
    }
    while (const auto* u = static_cast<const Update*>(convey_apull(conveyor, nullptr))) {
      ++counts[u->slot - base];
      ++received;
    }
  }
  bench.stop();
  convey_check(conveyor, convey_reset(conveyor), "convey_reset");
  const nlohmann::json stats = convey_stats(conveyor);
  convey_free(conveyor);

  // Recount: every rank's stream, only the slots this rank owns.
  std::vector<std::uint64_t> expect(slots_per_rank, 0);
  for (int r = 0; r < ranks; ++r) {
    Rng replay(common.seed, static_cast<std::uint64_t>(r));
    for (std::uint64_t k = 0; k < updates; ++k) {
      const std::uint64_t slot = replay.next() % total_slots;
      if (slot / slots_per_rank == static_cast<std::uint64_t>(me)) ++expect[slot - base];
    }
  }
  std::uint64_t wrong = 0, local = 0;
  for (std::uint64_t s = 0; s < slots_per_rank; ++s) {
    wrong += counts[s] != expect[s];
    local += counts[s];
  }
  const std::uint64_t total = sum_u64(MPI_COMM_WORLD, local), bad = sum_u64(MPI_COMM_WORLD, wrong);
  const bool ok = bad == 0 && total == updates * static_cast<std::uint64_t>(ranks);
  char detail[160];
  std::snprintf(detail, sizeof detail, "%llu updates counted, %llu slots wrong (sink %llu)",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(bad),
                static_cast<unsigned long long>(work.sink() & 1));
  char params[160];
  std::snprintf(params, sizeof params, R"({"updates_per_rank": %llu, "slots_per_rank": %llu})",
                static_cast<unsigned long long>(updates), static_cast<unsigned long long>(slots_per_rank));
  const Traffic traffic{updates, received, updates * sizeof(Update)};
  return bench.report(ok, detail, sizeof(Update), params, updates, traffic, config, stats);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
