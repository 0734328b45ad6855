// Pick counters: a counting library (malloc-counting-<container>) counts, per
// bin, every pick, the picks that had a choice, the non-full runs and the
// fullness of the picked run at each pick, and runs created and destroyed; an
// ordinary library counts nothing. RUNSEL_EXPECT_COUNTING says which this is.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "runsel.h"
#include "support/blocks.h"

namespace {

using runsel_test::opaque;

// A size class the test runner itself never uses, so the bin starts empty.
constexpr size_t kSize = 3584;

size_t bin_of(const runsel_stats_t& stats, size_t size) {
  for (size_t b = 0; b < stats.bin_count; ++b)
    if (stats.bins[b].size == size) return b;
  return stats.bin_count;
}

// Counters of bin `b` in `after` minus those in `before`.
struct Delta {
  size_t picks, with_choice, created, destroyed;
  size_t nonfull[RUNSEL_PICK_BUCKETS], fullness[RUNSEL_FULLNESS_BUCKETS];
};

Delta delta(const runsel_stats_t& before, const runsel_stats_t& after, size_t b) {
  const runsel_bin_stats &x = before.bins[b], &y = after.bins[b];
  Delta d{y.picks - x.picks,
          y.picks_with_choice - x.picks_with_choice,
          y.runs_created - x.runs_created,
          y.runs_destroyed - x.runs_destroyed,
          {},
          {}};
  for (size_t i = 0; i < RUNSEL_PICK_BUCKETS; ++i)
    d.nonfull[i] = y.nonfull_at_pick[i] - x.nonfull_at_pick[i];
  for (size_t i = 0; i < RUNSEL_FULLNESS_BUCKETS; ++i)
    d.fullness[i] = y.picked_fullness[i] - x.picked_fullness[i];
  return d;
}

bool expect_counting() {
  const char* value = getenv("RUNSEL_EXPECT_COUNTING");
  return value != nullptr && strcmp(value, "1") == 0;
}

TEST(PickCounters, ChoicesRunsAndFullnessOfAKnownSequence) {
  runsel_stats_t before;
  runsel_stats(&before);
  const bool counting = expect_counting();
  ASSERT_EQ(before.counting, counting ? 1u : 0u) << "variant " << runsel_variant();
#if RUNSEL_THREAD_CACHE_BUILD
  if (counting) {
    GTEST_SKIP() << "behind the thread cache the bins see the cache's batches (fills of "
                    "capacity >> fill_shift regions, flushes of half a stack, sizes its GC "
                    "changes), not this sequence of single mallocs and frees";
  }
#endif
  const size_t b = bin_of(before, kSize);
  ASSERT_LT(b, before.bin_count);
  ASSERT_EQ(before.bins[b].runs, 0u) << "the test needs an unused size class";
  const size_t n = before.bins[b].regions_per_run;
  ASSERT_GE(n, 2u);

  // Three runs filled one after another: each fill starts on an empty
  // container (a new run) and then picks the one non-full run n - 1 times.
  std::vector<void*> blocks;
  for (size_t i = 0; i < 3 * n; ++i) blocks.push_back(opaque(malloc(kSize)));
  runsel_stats_t filled;
  runsel_stats(&filled);
  Delta d = delta(before, filled, b);
  if (!counting) {
    EXPECT_EQ(d.picks + d.created + filled.bins[b].picks, 0u);
  } else {
    EXPECT_EQ(d.picks, 3 * n);
    EXPECT_EQ(d.with_choice, 0u);
    EXPECT_EQ(d.created, 3u);
    EXPECT_EQ(d.destroyed, 0u);
    EXPECT_EQ(d.nonfull[0], 3u);
    EXPECT_EQ(d.nonfull[1], 3 * (n - 1));
    size_t expected[RUNSEL_FULLNESS_BUCKETS] = {};
    for (size_t in_use = 1; in_use < n; ++in_use)
      expected[in_use * RUNSEL_FULLNESS_BUCKETS / n] += 3;
    for (size_t i = 0; i < RUNSEL_FULLNESS_BUCKETS; ++i)
      EXPECT_EQ(d.fullness[i], expected[i]) << "fullness bucket " << i;
  }

  // One region freed in each of the first two runs: the next pick chooses
  // between two runs, each with n - 1 regions in use.
  free(blocks[0]);
  free(blocks[n]);
  runsel_stats_t freed;
  runsel_stats(&freed);
  void* refill = opaque(malloc(kSize));
  runsel_stats_t picked;
  runsel_stats(&picked);
  d = delta(freed, picked, b);
  if (counting) {
    EXPECT_EQ(d.picks, 1u);
    EXPECT_EQ(d.with_choice, 1u);
    EXPECT_EQ(d.nonfull[2], 1u);  // bucket 2: two or three runs
    EXPECT_EQ(d.fullness[(n - 1) * RUNSEL_FULLNESS_BUCKETS / n], 1u);
    EXPECT_EQ(d.created, 0u);
  }

  // Everything freed: the three runs empty; the bin keeps the last one to
  // empty and gives the other two back to the arena, then purging gives back
  // the kept one too.
  free(refill);
  for (size_t i = 1; i < 3 * n; ++i)
    if (i != n) free(blocks[i]);
  runsel_thread_cache_flush();  // a thread cache's regions back to their runs
  runsel_stats_t emptied;
  runsel_stats(&emptied);
  d = delta(before, emptied, b);
  EXPECT_EQ(d.destroyed, counting ? 2u : 0u);
  EXPECT_EQ(emptied.bins[b].runs, 1u);
  EXPECT_EQ(emptied.bins[b].empty_runs, 1u);
  runsel_free_dirty_pages();
  runsel_stats_t purged;
  runsel_stats(&purged);
  d = delta(before, purged, b);
  EXPECT_EQ(d.destroyed, counting ? 3u : 0u);
  EXPECT_EQ(purged.bins[b].runs, 0u);
}

}  // namespace
