// index-gather: every rank asks for random entries of a distributed table and
// the owner replies (request/reply: the handler of a request sends). Verified:
// every reply equals the table's value, which is a pure function of the index.

#include <cstdio>
#include <vector>

#include "checks.h"
#include "common.h"

using namespace ferry::route;
using namespace ferry::route::bench;

namespace {
struct Request {
  std::uint64_t index;  // global table index
  std::uint64_t slot;   // where the requester stores the answer
};
struct Reply {
  std::uint64_t value;
  std::uint64_t slot;
};
}  // namespace

namespace {
int run(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  CommonOptions common;
  std::uint64_t requests = 100000, entries_per_rank = 1 << 16;
  CLI::App cli{"index-gather: request/reply reads of a distributed table"};
  add_common_flags(cli, common);
  cli.add_option("--requests", requests, "requests per rank");
  cli.add_option("--entries-per-rank", entries_per_rank, "table entries per rank")
      ->check(CLI::PositiveNumber);
  if (const int rc = parse(cli, argc, argv, rt.rank()); rc >= 0) return rc;

  Engine engine(rt);
  const int me = engine.rank(), ranks = engine.size();
  const std::uint64_t total = entries_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t base = entries_per_rank * static_cast<std::uint64_t>(me);
  std::vector<std::uint64_t> table(entries_per_rank);
  for (std::uint64_t i = 0; i < entries_per_rank; ++i) table[i] = table_value(common.seed, base + i);
  std::vector<std::uint64_t> wanted(requests), got(requests, 0);
  std::uint64_t replies = 0;

  auto on_reply = engine.register_handler<Reply>([&](Engine&, int, const Reply& r) {
    got[r.slot] = r.value;
    ++replies;
  });
  auto on_request = engine.register_handler<Request>([&](Engine& e, int from, const Request& q) {
    e.send(from, on_reply, Reply{table[q.index - base], q.slot});
  });
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("index_gather", engine, common, work);

  Rng rng(common.seed, static_cast<std::uint64_t>(me));
  for (std::uint64_t i = 0; i < requests; ++i) wanted[i] = rng.next() % total;
  bench.start();
  for (std::uint64_t i = 0; i < requests; ++i) {
    work.run();
    engine.send(static_cast<int>(wanted[i] / entries_per_rank), on_request, Request{wanted[i], i});
    bench.sent_one();
  }
  bench.stop();

  const Verdict v =
      check_index_gather(engine.comm(), wanted, got, replies, common.seed, entries_per_rank, work.sink());
  return bench.report(v.ok, v.detail, sizeof(Request), v.params);
}
}  // namespace

int main(int argc, char** argv) {
  return guarded_main("index_gather", run, argc, argv);
}
