// randperm on YGM: Ferry's bench/route/randperm.cpp in YGM's idiom. A random
// permutation by dart throwing: every item is thrown at a random slot of a
// table twice as large as the item count; a slot already taken throws the dart
// back (the dart's lambda sends it home with a second async) and the item is
// thrown again in the next round; a round ends at a barrier. The occupied
// slots, read in order, are the permutation. Verified through YGM, outside the
// timed phase: every value is sent to its owner, which checks that it arrives
// exactly once.

#include <cstdio>
#include <vector>

#include "../checks.h"
#include "peer_common.h"
#include "ygm_peer.h"

using namespace ferry::route::bench;
using namespace ferry::route::bench::peers;

namespace {
constexpr std::uint64_t kEmpty = ~0ull;
struct Dart {  // the payload, as Ferry's Dart
  std::uint64_t slot;
  std::uint64_t item;
};
struct Bounce {
  std::uint64_t item;
};

struct State {
  std::vector<std::uint64_t> target;  // this rank's slots
  std::uint64_t slot_base = 0;
  std::vector<std::uint64_t> bounced;  // items thrown back this round
  std::vector<std::uint32_t> seen;     // verification: arrivals per owned value
  std::uint64_t value_base = 0;
  std::uint64_t darts_received = 0, bounces_sent = 0, bounces_received = 0;
};

int run(int argc, char** argv) {
  ygm::comm world(&argc, &argv);
  PeerOptions common;
  std::uint64_t items_per_rank = 50000;
  CLI::App cli{"randperm (YGM): a distributed random permutation by dart throwing"};
  add_common_flags(cli, common);
  cli.add_option("--items-per-rank", items_per_rank, "items per rank")->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, world.rank()); rc >= 0) return rc;

  const int me = world.rank(), ranks = world.size();
  const std::uint64_t slots_per_rank = 2 * items_per_rank;
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  State st;
  st.target.assign(slots_per_rank, kEmpty);
  st.slot_base = slots_per_rank * static_cast<std::uint64_t>(me);
  st.value_base = static_cast<std::uint64_t>(me) * items_per_rank;
  st.seen.assign(items_per_rank, 0);
  ygm::ygm_ptr<State> pst = world.make_ygm_ptr(st);
  std::vector<std::uint64_t> unplaced;
  for (std::uint64_t i = 0; i < items_per_rank; ++i)
    unplaced.push_back(static_cast<std::uint64_t>(me) * items_per_rank + i);

  auto on_dart = [](ygm::comm* c, ygm::ygm_ptr<State> s, std::uint64_t slot, std::uint64_t item, int from) {
    ++s->darts_received;
    std::uint64_t& t = s->target[slot - s->slot_base];
    if (t == kEmpty) {
      t = item;
    } else {
      ++s->bounces_sent;
      c->async(
          from,
          [](ygm::ygm_ptr<State> r, std::uint64_t back) {
            r->bounced.push_back(back);
            ++r->bounces_received;
          },
          s, item);
    }
  };
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("randperm", "ygm", common, work);
  const std::string config = ygm_config(world);

  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  std::uint64_t rounds = 0, darts = 0;
  bench.start();
  for (;;) {
    for (std::uint64_t item : unplaced) {
      const std::uint64_t slot = rng.next() % total_slots;
      work.run();
      world.async(static_cast<int>(slot / slots_per_rank), on_dart, pst, slot, item, me);
      ++darts;
    }
    unplaced.clear();
    world.barrier();  // every dart landed or came back
    ++rounds;
    unplaced.swap(st.bounced);
    if (world.all_reduce_sum(static_cast<std::uint64_t>(unplaced.size())) == 0) break;
  }
  // The permutation: the occupied slots in global order.
  std::vector<std::uint64_t> perm;
  for (std::uint64_t s : st.target)
    if (s != kEmpty) perm.push_back(s);
  world.barrier();
  bench.stop();

  const std::uint64_t count = perm.size();
  for (std::uint64_t v : perm)
    world.async(
        static_cast<int>(v / items_per_rank),
        [](ygm::ygm_ptr<State> s, std::uint64_t value) {
          if (value >= s->value_base && value < s->value_base + s->seen.size())
            ++s->seen[value - s->value_base];
        },
        pst, v);
  world.barrier();
  const Verdict v =
      check_randperm(MPI_COMM_WORLD, st.seen, count, rounds, items_per_rank, ranks, work.sink());
  const Traffic traffic{darts + st.bounces_sent, st.darts_received + st.bounces_received,
                        darts * sizeof(Dart) + st.bounces_sent * sizeof(Bounce)};
  return bench.report(v.ok, v.detail, sizeof(Dart), v.params, items_per_rank, traffic, config);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
