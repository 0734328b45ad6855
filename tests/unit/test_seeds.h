// Seeds for the randomized unit tests: RUNSEL_TEST_SEED replays one, RUNSEL_STRESS scales.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace runsel::seeding {

inline std::uint64_t stress_multiplier() {
  const char* text = std::getenv("RUNSEL_STRESS");
  const std::uint64_t value = text != nullptr ? std::strtoull(text, nullptr, 0) : 1;
  return value > 0 ? value : 1;
}

// Seeds 1..count*RUNSEL_STRESS, or just RUNSEL_TEST_SEED when it is set.
inline std::vector<std::uint64_t> test_seeds(std::uint64_t count) {
  if (const char* text = std::getenv("RUNSEL_TEST_SEED")) {
    return {std::strtoull(text, nullptr, 0)};
  }
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t seed = 1; seed <= count * stress_multiplier(); ++seed) seeds.push_back(seed);
  return seeds;
}

inline std::string replay_hint(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: RUNSEL_TEST_SEED=" + std::to_string(seed) +
         ")";
}

}  // namespace runsel::seeding
