// randperm on bale's conveyors: Ferry's bench/route/randperm.cpp in the
// conveyor idiom. A random permutation by dart throwing, in rounds: every
// unplaced item is thrown at a random slot of a table twice as large as the
// item count; a slot already taken throws the dart back (a second conveyor,
// advanced with the first as in bale's ig_conveyor) and the item is thrown
// again in the next round. A round is one conveyor session: convey_begin, the
// loop until both conveyors are DONE, convey_reset (collective). The occupied
// slots, read in order, are the permutation. Verified through a conveyor,
// outside the timed phase: every value is sent to its owner, which checks that
// it arrives exactly once.

#include <cstdio>
#include <vector>

#include "../checks.h"
#include "convey_peer.h"
#include "peer_common.h"

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

int run(int argc, char** argv) {
  const ConveyMpi mpi(argc, argv);
  PeerOptions common;
  std::uint64_t items_per_rank = 50000;
  CLI::App cli{"randperm (conveyors): a distributed random permutation by dart throwing"};
  add_common_flags(cli, common);
  cli.add_option("--items-per-rank", items_per_rank, "items per rank")->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, mpi.rank()); rc >= 0) return rc;

  const int me = mpi.rank(), ranks = mpi.size();
  const std::uint64_t slots_per_rank = 2 * items_per_rank;
  const std::uint64_t total_slots = slots_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t slot_base = slots_per_rank * static_cast<std::uint64_t>(me);
  std::vector<std::uint64_t> target(slots_per_rank, kEmpty);
  std::vector<std::uint64_t> unplaced, bounced;
  for (std::uint64_t i = 0; i < items_per_rank; ++i)
    unplaced.push_back(static_cast<std::uint64_t>(me) * items_per_rank + i);

  convey_t* darts = convey_or_abort(convey_new(SIZE_MAX, 0, nullptr, convey_opt_SCATTER), "randperm");
  convey_t* bounces = convey_or_abort(convey_new(SIZE_MAX, 0, nullptr, 0), "randperm");
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("randperm", "convey", common, work);
  const std::string config = convey_config();

  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  std::uint64_t rounds = 0, thrown = 0, darts_received = 0, bounces_sent = 0, bounces_received = 0;
  bench.start();
  for (;;) {
    convey_check(darts, convey_begin(darts, sizeof(Dart), alignof(Dart)), "convey_begin");
    convey_check(bounces, convey_begin(bounces, sizeof(Bounce), alignof(Bounce)), "convey_begin");
    const std::size_t n = unplaced.size();
    std::size_t i = 0;
    Dart next{};
    bool drawn = false;  // `next` holds item i's dart, not yet accepted by the conveyor
    bool more = true;
    while (more = convey_advance(darts, i == n), more | convey_advance(bounces, !more)) {
      for (; i < n; ++i) {
        if (!drawn) {
          next = Dart{rng.next() % total_slots, unplaced[i]};
          work.run();
          drawn = true;
        }
        if (!convey_push(darts, &next, static_cast<int64_t>(next.slot / slots_per_rank))) break;
        drawn = false;
        ++thrown;
      }
      int64_t from = 0;
      while (const auto* d = static_cast<const Dart*>(convey_apull(darts, &from))) {
        std::uint64_t& s = target[d->slot - slot_base];
        if (s == kEmpty) {
          s = d->item;
        } else {
          const Bounce b{d->item};
          if (!convey_push(bounces, &b, from)) {
            convey_unpull(darts);  // bounce it once the bounces drained
            break;
          }
          ++bounces_sent;
        }
        ++darts_received;
      }
      while (const auto* b = static_cast<const Bounce*>(convey_apull(bounces, nullptr))) {
        bounced.push_back(b->item);
        ++bounces_received;
      }
    }
    convey_check(darts, convey_reset(darts), "convey_reset");  // every dart landed or came back
    convey_check(bounces, convey_reset(bounces), "convey_reset");
    ++rounds;
    unplaced.clear();
    unplaced.swap(bounced);
    if (sum_u64(MPI_COMM_WORLD, unplaced.size()) == 0) break;
  }
  // The permutation: the occupied slots in global order.
  std::vector<std::uint64_t> perm;
  for (std::uint64_t s : target)
    if (s != kEmpty) perm.push_back(s);
  bench.stop();
  const nlohmann::json stats = {{"darts", convey_stats(darts)}, {"bounces", convey_stats(bounces)}};

  // Verification: every value to its owner, through the dart conveyor again.
  const std::uint64_t count = perm.size();
  const std::uint64_t value_base = static_cast<std::uint64_t>(me) * items_per_rank;
  std::vector<std::uint32_t> seen(items_per_rank, 0);
  convey_check(darts, convey_begin(darts, sizeof(std::uint64_t), alignof(std::uint64_t)), "convey_begin");
  std::size_t k = 0;
  while (convey_advance(darts, k == perm.size())) {
    for (; k < perm.size(); ++k)
      if (!convey_push(darts, &perm[k], static_cast<int64_t>(perm[k] / items_per_rank))) break;
    while (const auto* v = static_cast<const std::uint64_t*>(convey_apull(darts, nullptr)))
      if (*v >= value_base && *v < value_base + items_per_rank) ++seen[*v - value_base];
  }
  convey_check(darts, convey_reset(darts), "convey_reset");
  convey_free(bounces);
  convey_free(darts);
  const Verdict v = check_randperm(MPI_COMM_WORLD, seen, count, rounds, items_per_rank, ranks, work.sink());
  const Traffic traffic{thrown + bounces_sent, darts_received + bounces_received,
                        thrown * sizeof(Dart) + bounces_sent * sizeof(Bounce)};
  return bench.report(v.ok, v.detail, sizeof(Dart), v.params, items_per_rank, traffic, config, stats);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
