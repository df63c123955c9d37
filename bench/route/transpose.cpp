// transpose: a random sparse matrix distributed by block rows is transposed by
// sending every nonzero (i, j, v) to the owner of row j of the transpose
// (Conveyors' transpose_matrix; one of the paper's host-dominated apps). Each
// rank builds its rows of the result in CSR and checks them against a serial
// transpose of the same seeded matrix (regenerated locally, so no gather).

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

#include "common.h"

using namespace ferry::route;
using namespace ferry::route::bench;

namespace {
struct Nonzero {
  std::uint32_t row;  // in the original matrix
  std::uint32_t col;
  double value;
};
// The k-th nonzero of row i: a pure function of (seed, i, k).
Nonzero nonzero(std::uint64_t seed, std::uint64_t n, std::uint64_t i, std::uint64_t k) {
  const std::uint64_t h = mix(seed ^ (i * 0x9e3779b97f4a7c15ull) ^ (k << 48));
  return {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(h % n),
          static_cast<double>(mix(h) >> 11) * 0x1.0p-53};
}
using Triple = std::tuple<std::uint32_t, std::uint32_t, double>;  // (row, col, value) of the transpose
}  // namespace

namespace {
int run(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  CommonOptions common;
  std::uint64_t rows_per_rank = 4096, nnz_per_row = 16;
  bool verify = true;
  CLI::App cli{"transpose: distributed sparse matrix transpose"};
  add_common_flags(cli, common);
  cli.add_option("--rows-per-rank", rows_per_rank, "matrix rows per rank")->check(CLI::PositiveNumber);
  cli.add_option("--nnz-per-row", nnz_per_row, "nonzeros per row");
  cli.add_option("--verify", verify, "check against a serial transpose (true/false)");
  if (const int rc = parse(cli, argc, argv, rt.rank()); rc >= 0) return rc;

  Engine engine(rt);
  const int me = engine.rank(), ranks = engine.size();
  const std::uint64_t n = rows_per_rank * static_cast<std::uint64_t>(ranks);
  const std::uint64_t first = rows_per_rank * static_cast<std::uint64_t>(me);
  std::vector<Nonzero> received;
  received.reserve(rows_per_rank * nnz_per_row * 5 / 4);
  auto deliver =
      engine.register_handler<Nonzero>([&](Engine&, int, const Nonzero& z) { received.push_back(z); });
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("transpose", engine, common, work);

  // The local rows, generated before the clock starts (the paper times the transpose).
  std::vector<Nonzero> mine;
  mine.reserve(rows_per_rank * nnz_per_row);
  for (std::uint64_t i = first; i < first + rows_per_rank; ++i)
    for (std::uint64_t k = 0; k < nnz_per_row; ++k) mine.push_back(nonzero(common.seed, n, i, k));

  bench.start();
  for (const Nonzero& z : mine) {
    work.run();
    engine.send(static_cast<int>(z.col / rows_per_rank), deliver, z);
    bench.sent_one();
  }
  engine.barrier();
  // Build the local rows of the transpose in CSR (row = original column).
  std::vector<std::uint64_t> row_ptr(rows_per_rank + 1, 0);
  for (const Nonzero& z : received) ++row_ptr[z.col - first + 1];
  for (std::uint64_t r = 0; r < rows_per_rank; ++r) row_ptr[r + 1] += row_ptr[r];
  std::vector<std::uint32_t> col_idx(received.size());
  std::vector<double> values(received.size());
  {
    std::vector<std::uint64_t> fill(row_ptr.begin(), row_ptr.end() - 1);
    for (const Nonzero& z : received) {
      const std::uint64_t at = fill[z.col - first]++;
      col_idx[at] = z.row;
      values[at] = z.value;
    }
  }
  bench.stop();

  std::uint64_t wrong = 0;
  if (verify) {
    std::vector<Triple> got, expect;
    for (std::uint64_t r = 0; r < rows_per_rank; ++r)
      for (std::uint64_t at = row_ptr[r]; at < row_ptr[r + 1]; ++at)
        got.emplace_back(static_cast<std::uint32_t>(first + r), col_idx[at], values[at]);
    for (std::uint64_t i = 0; i < n; ++i)
      for (std::uint64_t k = 0; k < nnz_per_row; ++k) {
        const Nonzero z = nonzero(common.seed, n, i, k);
        if (z.col >= first && z.col < first + rows_per_rank) expect.emplace_back(z.col, z.row, z.value);
      }
    std::sort(got.begin(), got.end());
    std::sort(expect.begin(), expect.end());
    if (got.size() != expect.size())
      wrong = std::max(got.size(), expect.size());
    else
      for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != expect[i];
  }
  const std::uint64_t bad = sum_u64(engine.comm(), wrong);
  const std::uint64_t total = sum_u64(engine.comm(), received.size());
  const bool ok = bad == 0 && total == n * nnz_per_row;
  char detail[200];
  std::snprintf(detail, sizeof detail, "%llu nonzeros transposed, %s, %llu wrong (sink %llu)",
                static_cast<unsigned long long>(total),
                verify ? "checked against a serial transpose" : "not checked",
                static_cast<unsigned long long>(bad), static_cast<unsigned long long>(work.sink() & 1));
  char params[160];
  std::snprintf(params, sizeof params, R"({"rows_per_rank": %llu, "nnz_per_row": %llu, "verify": %s})",
                static_cast<unsigned long long>(rows_per_rank), static_cast<unsigned long long>(nnz_per_row),
                verify ? "true" : "false");
  return bench.report(ok, detail, sizeof(Nonzero), params);
}
}  // namespace

int main(int argc, char** argv) {
  return guarded_main("transpose", run, argc, argv);
}
