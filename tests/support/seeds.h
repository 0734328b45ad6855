// Seeds, random numbers and scale for runsel's randomized tests.
// By default each randomized test takes fresh seeds (different every run:
// exploration). RUNSEL_TEST_SEEDS=fixed takes the fixed list 1..count instead,
// so a run can be repeated exactly: CI runs that list (meson test --setup ci,
// which tools/runsel test uses). A test prints its seed on failure, and
// RUNSEL_TEST_SEED=<n> replays that one seed. RUNSEL_STRESS=<k> multiplies the
// number of seeds or operations (CI runs k = 1), and RUNSEL_TEST_SCALE=quick
// (meson test --setup quick, which tools/runsel test uses without --all) runs a
// quarter of them: the same tests on fewer inputs.
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

// True under RUNSEL_TEST_SCALE=quick: the default test command's fewer inputs.
inline bool quick_scale() {
  const char* value = getenv("RUNSEL_TEST_SCALE");
  return value && strcmp(value, "quick") == 0;
}

// `full` seeds or operations, times RUNSEL_STRESS, a quarter of that (at least
// 1) under RUNSEL_TEST_SCALE=quick.
inline size_t scaled(size_t full) {
  const size_t count = full * stress_factor();
  return quick_scale() ? (count / 4 ? count / 4 : 1) : count;
}

// The seed RUNSEL_TEST_SEED asks to replay, if it is set.
inline std::optional<uint64_t> replayed_seed() {
  const char* value = getenv("RUNSEL_TEST_SEED");
  if (value && *value) return strtoull(value, nullptr, 0);
  return std::nullopt;
}

// True when RUNSEL_TEST_SEEDS=fixed asks for the fixed seed list.
inline bool fixed_seeds() {
  const char* value = getenv("RUNSEL_TEST_SEEDS");
  return value && strcmp(value, "fixed") == 0;
}

// A seed nobody chose: the clock, mixed, plus `index`. A loop's fresh seeds are
// consecutive, like the fixed ones, so a test that varies its case with seed % n
// still meets every case.
inline uint64_t fresh_seed(uint64_t index = 0) {
  static const uint64_t base =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
      0x9E3779B97F4A7C15ull;
  return base + index;
}

// One seed: RUNSEL_TEST_SEED if set, 1 under RUNSEL_TEST_SEEDS=fixed, else a fresh one.
inline uint64_t test_seed() {
  if (std::optional<uint64_t> seed = replayed_seed()) return *seed;
  return fixed_seeds() ? 1 : fresh_seed();
}

// scaled(count) seeds: 1, 2, ... under RUNSEL_TEST_SEEDS=fixed, fresh ones
// otherwise; just RUNSEL_TEST_SEED when it is set.
inline std::vector<uint64_t> test_seeds(uint64_t count) {
  if (std::optional<uint64_t> seed = replayed_seed()) return {*seed};
  std::vector<uint64_t> seeds;
  for (uint64_t i = 0; i < scaled(count); ++i)
    seeds.push_back(fixed_seeds() ? i + 1 : fresh_seed(i));
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
  uint64_t between(uint64_t low, uint64_t high) { return low + below(high - low + 1); }
  bool one_in(uint64_t n) { return below(n) == 0; }
};

}  // namespace runsel_test
