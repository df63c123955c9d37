// index-gather on bale's conveyors: Ferry's bench/route/index_gather.cpp in the
// conveyor idiom (bale's ig_conveyor): a request conveyor and a reply
// conveyor, advanced together; a request whose reply does not fit is unpulled
// and served later. Verified: every reply equals the table's value, a pure
// function of the index.

#include <cstdio>
#include <vector>

#include "../checks.h"
#include "convey_peer.h"
#include "peer_common.h"

using namespace ferry::route::bench;
using namespace ferry::route::bench::peers;

namespace {
struct Request {        // the payload, as Ferry's Request
  std::uint64_t index;  // global table index
  std::uint64_t slot;   // where the requester stores the answer
};
struct Reply {
  std::uint64_t value;
  std::uint64_t slot;
};

int run(int argc, char** argv) {
  const ConveyMpi mpi(argc, argv);
  PeerOptions common;
  std::uint64_t requests = 100000, entries_per_rank = 1 << 16;
  CLI::App cli{"index-gather (conveyors): request/reply reads of a distributed table"};
  add_common_flags(cli, common);
  cli.add_option("--requests", requests, "requests per rank");
  cli.add_option("--entries-per-rank", entries_per_rank, "table entries per rank")
      ->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, mpi.rank()); rc >= 0) return rc;

  const int me = mpi.rank(), ranks = mpi.size();
  const std::uint64_t total = entries_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t base = entries_per_rank * static_cast<std::uint64_t>(me);
  std::vector<std::uint64_t> table(entries_per_rank);
  for (std::uint64_t i = 0; i < entries_per_rank; ++i) table[i] = table_value(common.seed, base + i);
  std::vector<std::uint64_t> wanted(requests), got(requests, 0);
  std::uint64_t replies = 0, served = 0;

  convey_t* asks = convey_or_abort(convey_new(SIZE_MAX, 0, nullptr, convey_opt_SCATTER), "index_gather");
  convey_t* answers = convey_or_abort(convey_new(SIZE_MAX, 0, nullptr, 0), "index_gather");
  convey_check(asks, convey_begin(asks, sizeof(Request), alignof(Request)), "convey_begin");
  convey_check(answers, convey_begin(answers, sizeof(Reply), alignof(Reply)), "convey_begin");
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("index_gather", "convey", common, work);
  const std::string config = convey_config();

  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  for (std::uint64_t i = 0; i < requests; ++i) wanted[i] = rng.next() % total;
  bench.start();
  std::uint64_t i = 0;
  bool worked = false;  // the work of request i is done, the conveyor has not taken it yet
  bool more = true;
  // The request conveyor is done once this rank has pushed every request; the
  // reply conveyor once no request can arrive any more.
  while (more = convey_advance(asks, i == requests), more | convey_advance(answers, !more)) {
    for (; i < requests; ++i) {
      if (!worked) {
        work.run();
        worked = true;
      }
      const Request q{wanted[i], i};
      if (!convey_push(asks, &q, static_cast<int64_t>(wanted[i] / entries_per_rank))) break;
      worked = false;
    }
    int64_t from = 0;
    while (const auto* q = static_cast<const Request*>(convey_apull(asks, &from))) {
      const Reply r{table[q->index - base], q->slot};
      if (!convey_push(answers, &r, from)) {
        convey_unpull(asks);  // serve it again once the replies drained
        break;
      }
      ++served;
    }
    while (const auto* r = static_cast<const Reply*>(convey_apull(answers, nullptr))) {
      got[r->slot] = r->value;
      ++replies;
    }
  }
  bench.stop();
  convey_check(asks, convey_reset(asks), "convey_reset");
  convey_check(answers, convey_reset(answers), "convey_reset");
  const nlohmann::json stats = {{"requests", convey_stats(asks)}, {"replies", convey_stats(answers)}};
  convey_free(answers);
  convey_free(asks);

  const Verdict v =
      check_index_gather(MPI_COMM_WORLD, wanted, got, replies, common.seed, entries_per_rank, work.sink());
  const Traffic traffic{requests + served, served + replies,
                        requests * sizeof(Request) + served * sizeof(Reply)};
  return bench.report(v.ok, v.detail, sizeof(Request), v.params, requests, traffic, config, stats);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
