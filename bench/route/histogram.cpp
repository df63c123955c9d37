// histogram: every rank adds ones to random slots of a distributed table
// (fire-and-forget updates, Conveyors' "histo"). Verified exactly: each rank
// regenerates every rank's seeded stream and recounts its own slots.
// --receive picks how updates are taken: a handler per message, a batch
// handler per run, or pulled from an Inbox in the send loop (conveyors' idiom).

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "checks.h"
#include "common.h"
#include "ferry/route/inbox.h"

using namespace ferry::route;
using namespace ferry::route::bench;

namespace {
struct Update {
  std::uint64_t slot;  // global slot index
};
}  // namespace

namespace {
int run(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  CommonOptions common;
  std::uint64_t updates = 100000, slots_per_rank = 1 << 16;
  std::string receive = "handler";
  CLI::App cli{"histogram: fire-and-forget updates of a distributed table"};
  add_common_flags(cli, common);
  cli.add_option("--updates", updates, "updates per rank");
  cli.add_option("--slots-per-rank", slots_per_rank, "table slots per rank")->check(CLI::PositiveNumber);
  cli.add_option("--receive", receive,
                 "handler (one call a message), batch (one call a run) or pull (an Inbox)")
      ->check(CLI::IsMember({"handler", "batch", "pull"}));
  if (const int rc = parse(cli, argc, argv, rt.rank()); rc >= 0) return rc;

  Engine engine(rt);
  const int me = engine.rank(), ranks = engine.size();
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  std::vector<std::uint64_t> counts(slots_per_rank, 0);
  const std::uint64_t base = slots_per_rank * static_cast<std::uint64_t>(me);
  Handler<Update> add;
  if (receive == "handler") {
    add = engine.register_handler<Update>([&](Engine&, int, const Update& u) { ++counts[u.slot - base]; });
  } else if (receive == "batch") {
    add = engine.register_batch_handler<Update>([&](Engine&, int, std::span<const Update> us) {
      for (const Update& u : us) ++counts[u.slot - base];
    });
  }
  Inbox<Update> inbox(engine);  // registered in every mode, so handler ids agree
  const bool pull = receive == "pull";
  if (pull) add = inbox.handler();
  auto drain = [&] {
    Update u;
    while (inbox.try_pull(&u, nullptr)) ++counts[u.slot - base];
  };
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("histogram", engine, common, work);

  bench.start();
  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  for (std::uint64_t i = 0; i < updates; ++i) {
    const std::uint64_t slot = rng.next() % total_slots;
    work.run();  // the application's own memory traffic for this update
    engine.send(static_cast<int>(slot / slots_per_rank), add, Update{slot});
    bench.sent_one();
    if (pull) drain();
  }
  if (pull) {
    engine.barrier();  // every update is in its inbox
    drain();
  }
  bench.stop();

  const Verdict v = check_histogram(engine.comm(), counts, common.seed, me, ranks, updates, slots_per_rank,
                                    work.sink(), R"(, "receive": ")" + receive + "\"");
  return bench.report(v.ok, v.detail, sizeof(Update), v.params);
}
}  // namespace

int main(int argc, char** argv) {
  return guarded_main("histogram", run, argc, argv);
}
