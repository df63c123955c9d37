// index-gather on YGM: Ferry's bench/route/index_gather.cpp in YGM's idiom.
// Every rank asks for random entries of a distributed table; the request's
// lambda, run at the owner, sends the reply back with a second async (YGM
// gives a lambda no sender, so the request carries it). Verified: every reply
// equals the table's value, a pure function of the index.

#include <cstdio>
#include <vector>

#include "../checks.h"
#include "peer_common.h"
#include "ygm_peer.h"

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

struct State {
  std::vector<std::uint64_t> table;  // this rank's entries
  std::uint64_t base = 0;
  std::vector<std::uint64_t> got;  // replies, by request slot
  std::uint64_t replies = 0, served = 0;
};

int run(int argc, char** argv) {
  ygm::comm world(&argc, &argv);
  PeerOptions common;
  std::uint64_t requests = 100000, entries_per_rank = 1 << 16;
  CLI::App cli{"index-gather (YGM): request/reply reads of a distributed table"};
  add_common_flags(cli, common);
  cli.add_option("--requests", requests, "requests per rank");
  cli.add_option("--entries-per-rank", entries_per_rank, "table entries per rank")
      ->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, world.rank()); rc >= 0) return rc;

  const int me = world.rank(), ranks = world.size();
  const std::uint64_t total = entries_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t base = entries_per_rank * static_cast<std::uint64_t>(me);
  State st;
  st.table.resize(entries_per_rank);
  for (std::uint64_t i = 0; i < entries_per_rank; ++i) st.table[i] = table_value(common.seed, base + i);
  st.base = base;
  st.got.assign(requests, 0);
  ygm::ygm_ptr<State> pst = world.make_ygm_ptr(st);
  std::vector<std::uint64_t> wanted(requests);
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("index_gather", "ygm", common, work);
  const std::string config = ygm_config(world);

  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  for (std::uint64_t i = 0; i < requests; ++i) wanted[i] = rng.next() % total;
  auto on_request = [](ygm::comm* c, ygm::ygm_ptr<State> s, std::uint64_t index, std::uint64_t slot,
                       int from) {
    ++s->served;
    c->async(
        from,
        [](ygm::ygm_ptr<State> r, std::uint64_t value, std::uint64_t reply_slot) {
          r->got[reply_slot] = value;
          ++r->replies;
        },
        s, s->table[index - s->base], slot);
  };
  bench.start();
  for (std::uint64_t i = 0; i < requests; ++i) {
    work.run();
    world.async(static_cast<int>(wanted[i] / entries_per_rank), on_request, pst, wanted[i], i, me);
  }
  world.barrier();  // every request answered, every reply stored
  bench.stop();

  const Verdict v = check_index_gather(MPI_COMM_WORLD, wanted, st.got, st.replies, common.seed,
                                       entries_per_rank, work.sink());
  const Traffic traffic{requests + st.served, st.served + st.replies,
                        requests * sizeof(Request) + st.served * sizeof(Reply)};
  return bench.report(v.ok, v.detail, sizeof(Request), v.params, requests, traffic, config);
}
}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
