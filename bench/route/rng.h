#pragma once
// The seeded random streams every route application draws from, Ferry's and the
// peer libraries' versions alike, so the same flags give the same messages and
// a verifier can regenerate any rank's choices.

#include <cstdint>

namespace ferry::route::bench {

// splitmix64: a seeded stream per (seed, stream), cheap and reproducible.
inline std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
struct Rng {
  std::uint64_t state;
  Rng(std::uint64_t seed, std::uint64_t stream) : state(mix(seed * 0x100000001b3ull + stream)) {}
  std::uint64_t next() noexcept { return mix(state += 0x9e3779b97f4a7c15ull); }
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

}  // namespace ferry::route::bench
