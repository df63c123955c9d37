#pragma once
// qs-mini's physics, apart from its communication: particles, the box of
// cells, cross sections, the source, and the tracking loop. Everything is a
// pure function of the seed and the particle's own random stream, so a
// particle's path does not depend on which rank tracks which part of it (the
// serial check relies on that).

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common.h"

namespace ferry::route::bench::qs {

struct Particle {
  double pos[3];
  double dir[3];
  double energy;
  double weight;
  double time_left;  // to this cycle's census
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

// Cells are 1 wide along x (the decomposition axis: a slab of cx cells per
// rank) and `width` wide across, as Quicksilver's lx/nx and ly/ny may differ.
// Wide cells across mean fewer segments per slab crossing.
struct Box {
  int cx, ny, nz;  // cells: cx per rank along x, ny by nz across
  int ranks;
  double width = 1.0;   // of a cell along y and z
  bool reflect = true;  // Quicksilver's default boundary; false: particles escape
  int owner(int x) const noexcept { return x / cx; }
  double size(int axis) const noexcept { return axis == 0 ? 1.0 : width; }
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

inline int material(std::uint64_t seed, const std::int32_t c[3]) {
  const std::uint64_t key = (static_cast<std::uint64_t>(c[0]) << 40) ^
                            (static_cast<std::uint64_t>(c[1]) << 20) ^ static_cast<std::uint64_t>(c[2]);
  return static_cast<int>(mix(seed ^ key) % kMaterials);
}

inline double draw(Particle& p) noexcept {
  p.rng = p.rng * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<double>(mix(p.rng) >> 11) * 0x1.0p-53;  // [0, 1)
}

inline void isotropic(Particle& p) {
  const double mu = 2 * draw(p) - 1, phi = 2 * M_PI * draw(p), s = std::sqrt(1 - mu * mu);
  p.dir[0] = mu;
  p.dir[1] = s * std::cos(phi);
  p.dir[2] = s * std::sin(phi);
}

// Particle number id, born in the slab of rank id / per_rank: a pure function of (seed, id).
inline Particle source(std::uint64_t seed, std::uint64_t id, std::uint64_t per_rank, const Box& box,
                       double census) {
  Particle p{};
  p.id = id;
  p.rng = mix(seed ^ (id * 0xd1b54a32d192ed03ull));
  const int r = static_cast<int>(id / per_rank);
  p.pos[0] = (r + draw(p)) * box.cx;
  p.pos[1] = draw(p) * box.ny * box.width;
  p.pos[2] = draw(p) * box.nz * box.width;
  for (int a = 0; a < 3; ++a) p.cell[a] = static_cast<std::int32_t>(std::floor(p.pos[a] / box.size(a)));
  if (p.cell[0] >= (r + 1) * box.cx) p.cell[0] = (r + 1) * box.cx - 1;
  for (int a = 1; a < 3; ++a) {
    const int n = a == 1 ? box.ny : box.nz;
    if (p.cell[a] >= n) p.cell[a] = n - 1;
  }
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
  // A particle's end (absorbed, escaped, or at the last census), or a hop.
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
inline Outcome track(Particle& p, std::uint64_t seed, const Box& box, const CrossSections& xs, Work& work,
                     int me) {
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
      const double h = box.size(a);
      double d;
      if (p.dir[a] > 0)
        d = ((p.cell[a] + 1) * h - p.pos[a]) / p.dir[a];
      else if (p.dir[a] < 0)
        d = (p.cell[a] * h - p.pos[a]) / p.dir[a];
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
    const double h = box.size(axis);
    p.pos[axis] = step > 0 ? (p.cell[axis] + 1) * h : p.cell[axis] * h;
    p.cell[axis] += step;
    if (!box.inside(p.cell)) {
      if (!box.reflect) return Outcome::Escaped;
      p.cell[axis] -= step;  // a mirror: back into the cell, moving the other way
      p.dir[axis] = -p.dir[axis];
      continue;
    }
    if (me >= 0 && axis == 0 && box.owner(p.cell[0]) != me) return Outcome::Leaves;
  }
}

}  // namespace ferry::route::bench::qs
