// Why containers differ, counted per bin: how often the container had a real
// choice, how many non-full runs it chose among, how full the run it picked
// was, and runs created and destroyed. Only a counting build (-Dcounters=true,
// or the malloc-counting-<container> libraries) counts; elsewhere the bin's
// counters are an empty member and every call compiles to nothing, so the
// measured variants pay nothing for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "runsel.h"

namespace runsel {

#if defined(RUNSEL_COUNTERS)
inline constexpr bool kCounters = true;
#else
inline constexpr bool kCounters = false;
#endif

// Bucket of a non-full run count: 0, 1, 2-3, 4-7, ... (the last takes the rest).
constexpr std::size_t nonfull_bucket(std::size_t nonfull) {
  std::size_t bucket = 0;
  while (nonfull != 0 && bucket + 1 < RUNSEL_PICK_BUCKETS) {
    ++bucket;
    nonfull >>= 1;
  }
  return bucket;
}

// Tenth of the regions in use: 0 for [0 %, 10 %), ... 9 for [90 %, 100 %).
// A picked run is never full, so 9 is the highest a pick can reach.
constexpr std::size_t fullness_bucket(std::uint32_t free_count, std::uint32_t nregs) {
  const std::size_t bucket = std::size_t{nregs - free_count} * RUNSEL_FULLNESS_BUCKETS / nregs;
  return bucket < RUNSEL_FULLNESS_BUCKETS ? bucket : RUNSEL_FULLNESS_BUCKETS - 1;
}

struct PickCounts {
  std::uint64_t picks = 0;              // small allocations: each asks the container
  std::uint64_t picks_with_choice = 0;  // ... while it held two or more runs
  std::uint64_t runs_created = 0, runs_destroyed = 0;
  std::uint64_t nonfull_at_pick[RUNSEL_PICK_BUCKETS] = {};
  std::uint64_t picked_fullness[RUNSEL_FULLNESS_BUCKETS] = {};

  // The container held `nonfull` runs and picked one with `free_count` of
  // `nregs` regions free (nonfull == 0: nothing to pick, a new run follows).
  void pick(std::size_t nonfull, std::uint32_t free_count, std::uint32_t nregs) {
    ++picks;
    if (nonfull >= 2) ++picks_with_choice;
    ++nonfull_at_pick[nonfull_bucket(nonfull)];
    if (nonfull != 0) ++picked_fullness[fullness_bucket(free_count, nregs)];
  }
  void created() { ++runs_created; }
  void destroyed() { ++runs_destroyed; }
};

struct NoPickCounts {
  void pick(std::size_t, std::uint32_t, std::uint32_t) {}
  void created() {}
  void destroyed() {}
  operator PickCounts() const { return {}; }  // stats read zero
};

using PickCounters = std::conditional_t<kCounters, PickCounts, NoPickCounts>;

}  // namespace runsel
