// qs-mini: a particle-transport mini-app after Quicksilver. Particles (136
// bytes each) fly through a box of cells split into slabs, one per rank; each
// segment ends at a collision (scatter or absorption), a cell face, or census.
// A particle that crosses into another rank's slab is sent there (fire and
// forget); termination is by counts (the engine's quiescence), then an
// all-reduce of what is left. Every particle carries its own random stream, so
// the physics does not depend on the decomposition: conservation is checked
// (created = absorbed + census + escaped, in number and weight) and, with
// --verify-serial, rank 0 tracks every particle alone and must find exactly the
// same tallies.

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "common.h"

using namespace ferry::route;
using namespace ferry::route::bench;

namespace {

struct Particle {
  double pos[3];
  double dir[3];
  double energy;
  double weight;
  double time_left;  // to census
  double mfp_left;   // mean free paths to the next collision
  std::uint64_t id;
  std::uint64_t rng;
  std::int32_t cell[3];
  std::uint32_t segments;
  std::uint32_t collisions;
  std::uint32_t hops;
  std::uint32_t reserved[4];
};
static_assert(sizeof(Particle) == 136, "Quicksilver's particles are about 136 bytes");

constexpr int kMaterials = 4;
constexpr int kGroups = 64;
constexpr double kEmin = 0.01, kEmax = 10.0;

struct Box {
  int cx, ny, nz;  // cells: cx per rank along x, ny by nz across
  int ranks;
  int owner(int x) const noexcept { return x / cx; }
  bool inside(const std::int32_t c[3]) const noexcept {
    return c[0] >= 0 && c[0] < cx * ranks && c[1] >= 0 && c[1] < ny && c[2] >= 0 && c[2] < nz;
  }
};

struct CrossSections {
  std::array<double, kMaterials * kGroups> total;
  std::array<double, kMaterials> absorb;
  // scale < 1 lengthens flights: more cell faces (and slab faces) per collision.
  CrossSections(std::uint64_t seed, double scale) {
    for (int m = 0; m < kMaterials; ++m) {
      absorb[static_cast<std::size_t>(m)] = 0.04 + 0.03 * m;
      for (int g = 0; g < kGroups; ++g)
        total[static_cast<std::size_t>(m * kGroups + g)] =
            scale *
            (0.5 +
             static_cast<double>(mix(seed ^ static_cast<std::uint64_t>(m * kGroups + g)) % 1000) * 0.0015);
    }
  }
  double sigma(int m, double e) const noexcept {
    int g = static_cast<int>(std::log(e / kEmin) / std::log(kEmax / kEmin) * kGroups);
    g = g < 0 ? 0 : (g >= kGroups ? kGroups - 1 : g);
    return total[static_cast<std::size_t>(m * kGroups + g)];
  }
};

int material(std::uint64_t seed, const std::int32_t c[3]) {
  const std::uint64_t key = (static_cast<std::uint64_t>(c[0]) << 40) ^
                            (static_cast<std::uint64_t>(c[1]) << 20) ^ static_cast<std::uint64_t>(c[2]);
  return static_cast<int>(mix(seed ^ key) % kMaterials);
}

double draw(Particle& p) noexcept {
  p.rng = p.rng * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<double>(mix(p.rng) >> 11) * 0x1.0p-53;  // [0, 1)
}

void isotropic(Particle& p) {
  const double mu = 2 * draw(p) - 1, phi = 2 * M_PI * draw(p), s = std::sqrt(1 - mu * mu);
  p.dir[0] = mu;
  p.dir[1] = s * std::cos(phi);
  p.dir[2] = s * std::sin(phi);
}

// Particle number id, born in the slab of rank id / per_rank: a pure function of (seed, id).
Particle source(std::uint64_t seed, std::uint64_t id, std::uint64_t per_rank, const Box& box, double census) {
  Particle p{};
  p.id = id;
  p.rng = mix(seed ^ (id * 0xd1b54a32d192ed03ull));
  const int r = static_cast<int>(id / per_rank);
  p.pos[0] = (r + draw(p)) * box.cx;
  p.pos[1] = draw(p) * box.ny;
  p.pos[2] = draw(p) * box.nz;
  for (int a = 0; a < 3; ++a) p.cell[a] = static_cast<std::int32_t>(std::floor(p.pos[a]));
  if (p.cell[0] >= (r + 1) * box.cx) p.cell[0] = (r + 1) * box.cx - 1;
  isotropic(p);
  p.energy = 1 + draw(p);
  p.weight = 0.5 + draw(p);
  p.time_left = census;
  p.mfp_left = -std::log(1 - draw(p));
  return p;
}

enum class Outcome { Census, Absorbed, Escaped, Leaves };

struct Tallies {
  std::uint64_t created = 0, absorbed = 0, census = 0, escaped = 0, segments = 0, collisions = 0, hops = 0;
  double w_created = 0, w_absorbed = 0, w_census = 0, w_escaped = 0;
  void count(const Particle& p, Outcome o) {
    switch (o) {
      case Outcome::Census:
        ++census;
        w_census += p.weight;
        break;
      case Outcome::Absorbed:
        ++absorbed;
        w_absorbed += p.weight;
        break;
      case Outcome::Escaped:
        ++escaped;
        w_escaped += p.weight;
        break;
      case Outcome::Leaves: ++hops; return;
    }
    segments += p.segments;
    collisions += p.collisions;
  }
};

// Moves p segment by segment until it is absorbed, reaches census, escapes, or
// enters a slab other than `me`'s (me < 0: one rank tracks everything).
Outcome track(Particle& p, std::uint64_t seed, const Box& box, const CrossSections& xs, Work& work, int me) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  for (;;) {
    ++p.segments;
    work.run();  // the nuclear-data lookups of a real code, as DRAM traffic
    const int m = material(seed, p.cell);
    const double v = std::sqrt(p.energy);
    const double sigma = xs.sigma(m, p.energy);
    const double d_coll = p.mfp_left / sigma;
    double d_face = inf;
    int axis = 0, step = 0;
    for (int a = 0; a < 3; ++a) {
      double d;
      if (p.dir[a] > 0)
        d = ((p.cell[a] + 1) - p.pos[a]) / p.dir[a];
      else if (p.dir[a] < 0)
        d = (p.cell[a] - p.pos[a]) / p.dir[a];
      else
        continue;
      if (d < 0) d = 0;
      if (d < d_face) {
        d_face = d;
        axis = a;
        step = p.dir[a] > 0 ? 1 : -1;
      }
    }
    const double d_census = p.time_left * v;
    const double d = std::min(d_coll, std::min(d_face, d_census));
    for (int a = 0; a < 3; ++a) p.pos[a] += p.dir[a] * d;
    p.time_left -= d / v;
    p.mfp_left -= d * sigma;
    if (d == d_census) {
      p.time_left = 0;
      return Outcome::Census;
    }
    if (d == d_coll) {
      ++p.collisions;
      if (draw(p) < xs.absorb[static_cast<std::size_t>(m)]) return Outcome::Absorbed;
      isotropic(p);
      p.energy *= 0.8 + 0.2 * draw(p);
      if (p.energy < kEmin) return Outcome::Absorbed;  // thermalised
      p.mfp_left = -std::log(1 - draw(p));
      continue;
    }
    // A cell face: snap onto it exactly, so every decomposition computes the same path.
    p.pos[axis] = step > 0 ? p.cell[axis] + 1 : p.cell[axis];
    p.cell[axis] += step;
    if (!box.inside(p.cell)) return Outcome::Escaped;
    if (me >= 0 && axis == 0 && box.owner(p.cell[0]) != me) return Outcome::Leaves;
  }
}

}  // namespace

namespace {
int run(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  CommonOptions common;
  std::uint64_t particles = 20000;
  int cx = 2, ny = 8, nz = 8;
  double census = 8.0, xs_scale = 1.0;
  bool verify_serial = false;
  CLI::App cli{"qs-mini: Monte Carlo particle transport after Quicksilver"};
  add_common_flags(cli, common);
  cli.add_option("--particles-per-rank", particles, "particles born on each rank")
      ->check(CLI::PositiveNumber);
  cli.add_option("--cells-x-per-rank", cx, "slab width in cells")->check(CLI::PositiveNumber);
  cli.add_option("--cells-y", ny, "box cells along y")->check(CLI::PositiveNumber);
  cli.add_option("--cells-z", nz, "box cells along z")->check(CLI::PositiveNumber);
  cli.add_option("--census", census, "time to census");
  cli.add_option("--xs-scale", xs_scale,
                 "scales every cross section (below 1: longer flights, more face crossings)")
      ->check(CLI::PositiveNumber);
  cli.add_flag("--verify-serial", verify_serial, "rank 0 tracks every particle alone and compares tallies");
  if (const int rc = parse(cli, argc, argv, rt.rank()); rc >= 0) return rc;

  Engine engine(rt);
  const int me = engine.rank(), ranks = engine.size();
  const Box box{cx, ny, nz, ranks};
  const CrossSections xs(common.seed, xs_scale);
  std::vector<Particle> queue, incoming;
  auto arrive =
      engine.register_handler<Particle>([&](Engine&, int, const Particle& p) { incoming.push_back(p); });
  Work work(common.work_table_mib, common.seed + static_cast<std::uint64_t>(me), common.work_per_message);
  Bench bench("qs_mini", engine, common, work);

  Tallies t;
  for (std::uint64_t i = 0; i < particles; ++i) {
    queue.push_back(
        source(common.seed, static_cast<std::uint64_t>(me) * particles + i, particles, box, census));
    ++t.created;
    t.w_created += queue.back().weight;
  }
  std::uint64_t cycles = 0, tracked = 0;
  bench.start();
  for (;;) {
    for (;;) {
      if (queue.empty()) {
        if (incoming.empty()) break;
        queue.swap(incoming);
      }
      Particle p = queue.back();
      queue.pop_back();
      const Outcome o = track(p, common.seed, box, xs, work, me);
      t.count(p, o);
      if (o == Outcome::Leaves) {
        ++p.hops;
        engine.send(box.owner(p.cell[0]), arrive, p);
        bench.sent_one();
      }
      if (++tracked % common.progress_every == 0) engine.progress();
    }
    engine.barrier();  // quiescence: every particle in flight has arrived somewhere
    ++cycles;
    if (sum_u64(engine.comm(), queue.size() + incoming.size()) == 0) break;
  }
  bench.stop();

  // Conservation, in number and in weight.
  MPI_Comm comm = engine.comm();
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
  std::string serial = "serial check skipped";
  if (verify_serial) {
    int serial_ok = 1;
    if (me == 0) {
      Tallies s;
      Work none(0, 0, 0);
      for (std::uint64_t id = 0; id < particles * static_cast<std::uint64_t>(ranks); ++id) {
        Particle p = source(common.seed, id, particles, box, census);
        s.count(p, track(p, common.seed, box, xs, none, -1));
      }
      serial_ok = s.absorbed == g.absorbed && s.census == g.census && s.escaped == g.escaped &&
                  s.segments == g.segments && s.collisions == g.collisions;
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "serial run: %llu absorbed, %llu census, %llu escaped, %llu segments: %s",
                    static_cast<unsigned long long>(s.absorbed), static_cast<unsigned long long>(s.census),
                    static_cast<unsigned long long>(s.escaped), static_cast<unsigned long long>(s.segments),
                    serial_ok ? "identical" : "DIFFERENT");
      serial = buf;
    }
    MPI_Bcast(&serial_ok, 1, MPI_INT, 0, comm);
    ok = ok && serial_ok;
  }
  char detail[400];
  std::snprintf(
      detail, sizeof detail,
      "%llu particles: %llu absorbed, %llu census, %llu escaped; %llu segments, %llu collisions, %llu hops "
      "between ranks, %llu cycles; %s (sink %llu)",
      static_cast<unsigned long long>(g.created), static_cast<unsigned long long>(g.absorbed),
      static_cast<unsigned long long>(g.census), static_cast<unsigned long long>(g.escaped),
      static_cast<unsigned long long>(g.segments), static_cast<unsigned long long>(g.collisions),
      static_cast<unsigned long long>(g.hops), static_cast<unsigned long long>(cycles), serial.c_str(),
      static_cast<unsigned long long>(work.sink() & 1));
  char params[256];
  std::snprintf(
      params, sizeof params,
      R"({"particles_per_rank": %llu, "cells_x_per_rank": %d, "cells_y": %d, "cells_z": %d, "census": %g, "xs_scale": %g, "segments": %llu})",
      static_cast<unsigned long long>(particles), cx, ny, nz, census, xs_scale,
      static_cast<unsigned long long>(g.segments));
  return bench.report(ok, detail, sizeof(Particle), params);
}
}  // namespace

int main(int argc, char** argv) {
  return guarded_main("qs_mini", run, argc, argv);
}
