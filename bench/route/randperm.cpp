// randperm: a random permutation by dart throwing (Conveyors' randperm): every
// item is thrown at a random slot of a table twice as large as the item count;
// a slot already taken throws the dart back (the handler replies) and the item
// is thrown again in the next round. The occupied slots, read in order, are the
// permutation. Verified through the engine: every value is sent to its owner,
// which checks that it arrives exactly once.

#include <cstdio>
#include <vector>

#include "checks.h"
#include "common.h"

using namespace ferry::route;
using namespace ferry::route::bench;

namespace {
constexpr std::uint64_t kEmpty = ~0ull;
struct Dart {
  std::uint64_t slot;
  std::uint64_t item;
};
struct Bounce {
  std::uint64_t item;
};
struct Mark {
  std::uint64_t value;
};
}  // namespace

namespace {
int run(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  CommonOptions common;
  std::uint64_t items_per_rank = 50000;
  CLI::App cli{"randperm: a distributed random permutation by dart throwing"};
  add_common_flags(cli, common);
  cli.add_option("--items-per-rank", items_per_rank, "items per rank")->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, rt.rank()); rc >= 0) return rc;

  Engine engine(rt);
  const int me = engine.rank(), ranks = engine.size();
  const std::uint64_t slots_per_rank = 2 * items_per_rank;
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t slot_base = slots_per_rank * static_cast<std::uint64_t>(me);
  std::vector<std::uint64_t> target(slots_per_rank, kEmpty);
  std::vector<std::uint64_t> unplaced, bounced;
  for (std::uint64_t i = 0; i < items_per_rank; ++i)
    unplaced.push_back(static_cast<std::uint64_t>(me) * items_per_rank + i);

  Handler<Bounce> on_bounce =
      engine.register_handler<Bounce>([&](Engine&, int, const Bounce& b) { bounced.push_back(b.item); });
  auto on_dart = engine.register_handler<Dart>([&](Engine& e, int from, const Dart& d) {
    std::uint64_t& s = target[d.slot - slot_base];
    if (s == kEmpty)
      s = d.item;
    else
      e.send(from, on_bounce, Bounce{d.item});
  });
  const std::uint64_t value_base = static_cast<std::uint64_t>(me) * items_per_rank;
  std::vector<std::uint32_t> seen(items_per_rank, 0);
  auto on_mark = engine.register_handler<Mark>([&](Engine&, int, const Mark& m) {
    if (m.value >= value_base && m.value < value_base + items_per_rank) ++seen[m.value - value_base];
  });
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("randperm", engine, common, work);

  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  std::uint64_t rounds = 0;
  bench.start();
  for (;;) {
    for (std::uint64_t item : unplaced) {
      const std::uint64_t slot = rng.next() % total_slots;
      work.run();
      engine.send(static_cast<int>(slot / slots_per_rank), on_dart, Dart{slot, item});
      bench.sent_one();
    }
    unplaced.clear();
    engine.barrier();  // every dart landed or came back
    ++rounds;
    unplaced.swap(bounced);
    if (sum_u64(engine.comm(), unplaced.size()) == 0) break;
  }
  // The permutation: the occupied slots in global order (rank r's part starts
  // at the number of items placed on ranks below r).
  std::vector<std::uint64_t> perm;
  for (std::uint64_t s : target)
    if (s != kEmpty) perm.push_back(s);
  bench.stop();

  const std::uint64_t count = perm.size();
  for (std::uint64_t v : perm) engine.send(static_cast<int>(v / items_per_rank), on_mark, Mark{v});
  engine.barrier();
  const Verdict v = check_randperm(engine.comm(), seen, count, rounds, items_per_rank, ranks, work.sink());
  return bench.report(v.ok, v.detail, sizeof(Dart), v.params);
}
}  // namespace

int main(int argc, char** argv) {
  return guarded_main("randperm", run, argc, argv);
}
