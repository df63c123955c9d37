// histogram on YGM: Ferry's bench/route/histogram.cpp in YGM's idiom (async
// with a capture-free lambda that reaches the table through a ygm_ptr, then
// barrier). Same flags, streams and exact verification: each rank regenerates
// every rank's seeded stream and recounts its own slots.

#include <cstdio>
#include <vector>

#include "../checks.h"
#include "peer_common.h"
#include "ygm_peer.h"

using namespace ferry::route::bench;
using namespace ferry::route::bench::peers;

namespace {
struct Update {
  std::uint64_t slot;  // global slot index (the payload, as Ferry's Update)
};
struct Table {
  std::vector<std::uint64_t> counts;
  std::uint64_t base = 0;
  std::uint64_t received = 0;
};

int run(int argc, char** argv) {
  ygm::comm world(&argc, &argv);
  PeerOptions common;
  std::uint64_t updates = 100000, slots_per_rank = 1 << 16;
  CLI::App cli{"histogram (YGM): fire-and-forget updates of a distributed table"};
  add_common_flags(cli, common);
  cli.add_option("--updates", updates, "updates per rank");
  cli.add_option("--slots-per-rank", slots_per_rank, "table slots per rank")->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, world.rank()); rc >= 0) return rc;

  const int me = world.rank(), ranks = world.size();
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t base = slots_per_rank * static_cast<std::uint64_t>(me);
  Table table{std::vector<std::uint64_t>(slots_per_rank, 0), base, 0};
  ygm::ygm_ptr<Table> ptable = world.make_ygm_ptr(table);
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("histogram", "ygm", common, work);
  const std::string config = ygm_config(world);

  bench.start();
  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  for (std::uint64_t i = 0; i < updates; ++i) {
    const std::uint64_t slot = rng.next() % total_slots;
    work.run();  // the application's own memory traffic for this update
    world.async(
        static_cast<int>(slot / slots_per_rank),
        [](ygm::ygm_ptr<Table> t, std::uint64_t s) {
          ++t->counts[s - t->base];
          ++t->received;
        },
        ptable, slot);
  }
  world.barrier();  // every update delivered
  bench.stop();

  const Verdict v = check_histogram(MPI_COMM_WORLD, table.counts, common.seed, me, ranks, updates,
                                    slots_per_rank, work.sink());
  const Traffic traffic{updates, table.received, updates * sizeof(Update)};
  return bench.report(v.ok, v.detail, sizeof(Update), v.params, updates, traffic, config);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
