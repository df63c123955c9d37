// qs-mini: a particle-transport mini-app after Quicksilver. Particles (136
// bytes each) fly through a box of cells split into slabs, one per rank; each
// segment ends at a collision (scatter or absorption), a cell face, or census.
//
// The loop is Quicksilver's (its cycleTracking): a run is a number of cycles
// (time steps); in each, every rank tracks the particles it holds, and a
// particle that crosses into another rank's slab is sent there (fire and
// forget) and tracked on arrival, by the message's handler, while the rank
// goes on with its own particles or waits for the cycle's end. A cycle ends
// when every particle has been absorbed, escaped, or reached census (the
// engine's quiescence barrier: Quicksilver's sent/received count test), then an
// all-reduce of the particles left (its cycle tallies). Particles at census
// wait where they are for the next cycle. The outer boundary reflects, as in
// Quicksilver by default.
//
// Every particle carries its own random stream, so the physics does not depend
// on the decomposition: conservation is checked (created = absorbed + census +
// escaped, in number and weight) and, with --verify-serial, rank 0 tracks every
// particle alone and must find exactly the same tallies.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common.h"
#include "qs_physics.h"

using namespace ferry::route;
using namespace ferry::route::bench;
using namespace ferry::route::bench::qs;

namespace {

struct Setup {
  std::uint64_t particles = 20000;
  int cx = 2, ny = 8, nz = 8;
  int cycles = 8;
  double census = 1.0, xs_scale = 1.0, cell_width = 1.0;
  std::string boundary = "reflect";
  bool verify_serial = false;
};

// Rank 0 tracks every particle of every rank alone, cycle after cycle.
Tallies serial_run(const Setup& s, std::uint64_t seed, const Box& box, const CrossSections& xs, int ranks) {
  Tallies t;
  Work none(0, 0, 0);
  for (std::uint64_t id = 0; id < s.particles * static_cast<std::uint64_t>(ranks); ++id) {
    Particle p = source(seed, id, s.particles, box, s.census);
    for (int c = 0;; ++c) {
      const Outcome o = track(p, seed, box, xs, none, -1);
      if (o == Outcome::Census && c + 1 < s.cycles) {
        p.time_left = s.census;
        continue;
      }
      t.count(p, o);
      break;
    }
  }
  return t;
}

int run(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  CommonOptions common;
  Setup s;
  CLI::App cli{"qs-mini: Monte Carlo particle transport after Quicksilver"};
  add_common_flags(cli, common);
  cli.add_option("--particles-per-rank", s.particles, "particles born on each rank")
      ->check(CLI::PositiveNumber);
  cli.add_option("--cells-x-per-rank", s.cx, "slab width in cells")->check(CLI::PositiveNumber);
  cli.add_option("--cells-y", s.ny, "box cells along y")->check(CLI::PositiveNumber);
  cli.add_option("--cells-z", s.nz, "box cells along z")->check(CLI::PositiveNumber);
  cli.add_option("--cell-width", s.cell_width,
                 "cell size along y and z (along x it is 1): wider cells, fewer segments per slab crossing")
      ->check(CLI::PositiveNumber);
  cli.add_option("--cycles", s.cycles, "time steps, each ending at census")->check(CLI::PositiveNumber);
  cli.add_option("--census", s.census, "time to census in each cycle")->check(CLI::PositiveNumber);
  cli.add_option("--xs-scale", s.xs_scale,
                 "scales every cross section (below 1: longer flights, more face crossings)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--boundary", s.boundary, "outer boundary: reflect (Quicksilver's default) or escape")
      ->check(CLI::IsMember({"reflect", "escape"}));
  cli.add_flag("--verify-serial", s.verify_serial, "rank 0 tracks every particle alone and compares tallies");
  if (const int rc = parse(cli, argc, argv, rt.rank()); rc >= 0) return rc;

  Engine engine(rt);
  MPI_Comm comm = engine.comm();
  const int me = engine.rank(), ranks = engine.size();
  const Box box{s.cx, s.ny, s.nz, ranks, s.cell_width, s.boundary == "reflect"};
  const CrossSections xs(common.seed, s.xs_scale);
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("qs_mini", engine, common, work);
  std::vector<Particle> queue, next;  // this cycle's particles here; those at its census
  Tallies t;
  int cycle = 0;

  // Tracks p on this rank until it ends, reaches census, or leaves for another
  // slab (then it is sent there); true when it was sent.
  Handler<Particle> arrive;
  auto follow = [&](Particle& p) {
    const Outcome o = track(p, common.seed, box, xs, work, me);
    if (o == Outcome::Census && cycle + 1 < s.cycles) {
      p.time_left = s.census;
      next.push_back(p);
      return false;
    }
    t.count(p, o);
    if (o != Outcome::Leaves) return false;
    ++p.hops;
    engine.send(box.owner(p.cell[0]), arrive, p);
    return true;
  };
  // A particle that crossed into our slab is tracked on arrival, inside
  // progress() or barrier(), like the vault Quicksilver fills between batches.
  arrive = engine.register_handler<Particle>([&](Engine&, int, const Particle& in) {
    Particle p = in;
    if (follow(p)) bench.sent_in_handler();
  });

  for (std::uint64_t i = 0; i < s.particles; ++i) {
    queue.push_back(
        source(common.seed, static_cast<std::uint64_t>(me) * s.particles + i, s.particles, box, s.census));
    ++t.created;
    t.w_created += queue.back().weight;
  }
  std::uint64_t tracked = 0;
  int cycles_run = 0;
  bench.start();
  for (cycle = 0; cycle < s.cycles; ++cycle) {
    while (!queue.empty()) {
      Particle p = queue.back();
      queue.pop_back();
      if (follow(p)) bench.sent_one();
      if (++tracked % common.progress_every == 0) engine.progress();
    }
    engine.barrier();  // census: every particle of this cycle, everywhere, has stopped
    ++cycles_run;
    // The cycle's tally. Being collective, it also keeps cycles apart: no rank
    // sends a particle of the next cycle before every rank has left this
    // barrier, so a handler always tracks a particle of its rank's cycle.
    if (sum_u64(comm, next.size()) == 0) break;
    queue.swap(next);
  }
  bench.stop();

  // Conservation, in number and in weight.
  Tallies g;
  g.created = sum_u64(comm, t.created);
  g.absorbed = sum_u64(comm, t.absorbed);
  g.census = sum_u64(comm, t.census);
  g.escaped = sum_u64(comm, t.escaped);
  g.segments = sum_u64(comm, t.segments);
  g.collisions = sum_u64(comm, t.collisions);
  g.hops = sum_u64(comm, t.hops);
  g.w_created = sum_f64(comm, t.w_created);
  const double w_out = sum_f64(comm, t.w_absorbed + t.w_census + t.w_escaped);
  bool ok = g.created == g.absorbed + g.census + g.escaped &&
            std::fabs(g.w_created - w_out) <= 1e-9 * std::max(1.0, g.w_created);
  // Load balance: segments tracked on the busiest rank against the mean. A
  // cycle lasts as long as its busiest rank; the others wait in its barrier.
  std::uint64_t busiest = 0;
  const std::uint64_t mine = work.calls();
  MPI_Allreduce(&mine, &busiest, 1, MPI_UINT64_T, MPI_MAX, comm);
  const double imbalance = static_cast<double>(busiest) * ranks / static_cast<double>(sum_u64(comm, mine));
  std::string serial = "serial check skipped";
  if (s.verify_serial) {
    int serial_ok = 1;
    if (me == 0) {
      const Tallies r = serial_run(s, common.seed, box, xs, ranks);
      serial_ok = r.absorbed == g.absorbed && r.census == g.census && r.escaped == g.escaped &&
                  r.segments == g.segments && r.collisions == g.collisions;
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "serial run: %llu absorbed, %llu census, %llu escaped, %llu segments: %s",
                    static_cast<unsigned long long>(r.absorbed), static_cast<unsigned long long>(r.census),
                    static_cast<unsigned long long>(r.escaped), static_cast<unsigned long long>(r.segments),
                    serial_ok ? "identical" : "DIFFERENT");
      serial = buf;
    }
    MPI_Bcast(&serial_ok, 1, MPI_INT, 0, comm);
    ok = ok && serial_ok;
  }
  const double seg_per_hop = g.hops ? static_cast<double>(g.segments) / static_cast<double>(g.hops) : 0.0;
  char detail[512];
  std::snprintf(
      detail, sizeof detail,
      "%llu particles: %llu absorbed, %llu census, %llu escaped; %llu segments, %llu collisions, %llu hops "
      "between ranks (%.2f segments a hop), %d cycles, busiest rank %.2fx the mean; %s (sink %llu)",
      static_cast<unsigned long long>(g.created), static_cast<unsigned long long>(g.absorbed),
      static_cast<unsigned long long>(g.census), static_cast<unsigned long long>(g.escaped),
      static_cast<unsigned long long>(g.segments), static_cast<unsigned long long>(g.collisions),
      static_cast<unsigned long long>(g.hops), seg_per_hop, cycles_run, imbalance, serial.c_str(),
      static_cast<unsigned long long>(work.sink() & 1));
  char params[512];
  std::snprintf(
      params, sizeof params,
      R"({"particles_per_rank": %llu, "cells_x_per_rank": %d, "cells_y": %d, "cells_z": %d, "cell_width": %g, )"
      R"("cycles": %d, "cycles_run": %d, "census": %g, "xs_scale": %g, "boundary": "%s", "segments": %llu, )"
      R"("segments_per_hop": %.3f, "imbalance": %.3f})",
      static_cast<unsigned long long>(s.particles), s.cx, s.ny, s.nz, s.cell_width, s.cycles, cycles_run,
      s.census, s.xs_scale, s.boundary.c_str(), static_cast<unsigned long long>(g.segments), seg_per_hop,
      imbalance);
  return bench.report(ok, detail, sizeof(Particle), params);
}
}  // namespace

int main(int argc, char** argv) {
  return guarded_main("qs_mini", run, argc, argv);
}
