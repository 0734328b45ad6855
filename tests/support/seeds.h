// Seeds, random numbers and scale for runsel's randomized tests.
// A test prints its seed on failure; RUNSEL_TEST_SEED=<n> replays it, and
// RUNSEL_STRESS=<k> multiplies its operation count (CI runs k = 1).
#pragma once

#include <stdint.h>
#include <stdlib.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace runsel_test {

// A number from the environment, or fallback when it is unset or empty.
inline size_t env_number(const char* name, size_t fallback) {
  const char* value = getenv(name);
  return value && *value ? strtoull(value, nullptr, 0) : fallback;
}

// Scale of the long runs: RUNSEL_STRESS (default 1).
inline size_t stress_factor() {
  size_t factor = env_number("RUNSEL_STRESS", 1);
  return factor ? factor : 1;
}

// The seed RUNSEL_TEST_SEED asks to replay, if it is set.
inline std::optional<uint64_t> replayed_seed() {
  const char* value = getenv("RUNSEL_TEST_SEED");
  if (value && *value) return strtoull(value, nullptr, 0);
  return std::nullopt;
}

// RUNSEL_TEST_SEED if set, otherwise a fresh one from the clock.
inline uint64_t test_seed() {
  if (std::optional<uint64_t> seed = replayed_seed()) return *seed;
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
         0x9E3779B97F4A7C15ull;
}

// Seeds 1..count*RUNSEL_STRESS, or just RUNSEL_TEST_SEED when it is set.
inline std::vector<uint64_t> test_seeds(uint64_t count) {
  if (std::optional<uint64_t> seed = replayed_seed()) return {*seed};
  std::vector<uint64_t> seeds;
  for (uint64_t seed = 1; seed <= count * stress_factor(); ++seed) seeds.push_back(seed);
  return seeds;
}

inline std::string replay_hint(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay with RUNSEL_TEST_SEED=" + std::to_string(seed) +
         ")";
}

// splitmix64: a small, seedable random sequence.
inline uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Random {
  uint64_t state;
  explicit Random(uint64_t seed) : state(seed) {}
  uint64_t next() { return splitmix(state); }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool one_in(uint64_t n) { return below(n) == 0; }
};

}  // namespace runsel_test
