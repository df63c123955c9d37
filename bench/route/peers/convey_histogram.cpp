// histogram on bale's conveyors: Ferry's bench/route/histogram.cpp in the
// conveyor idiom (bale's histo_conveyor): push until the conveyor refuses, pull
// what arrived, advance, until convey_advance() reports DONE. Same flags,
// streams and exact verification: each rank regenerates every rank's seeded
// stream and recounts its own slots.

#include <cstdio>
#include <vector>

#include "../checks.h"
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

  const Verdict v =
      check_histogram(MPI_COMM_WORLD, counts, common.seed, me, ranks, updates, slots_per_rank, work.sink());
  const Traffic traffic{updates, received, updates * sizeof(Update)};
  return bench.report(v.ok, v.detail, sizeof(Update), v.params, updates, traffic, config, stats);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
