// The as-built profile (RUNSEL_CONF=profile:as_built; memory/README.md, "The
// as-built profile"): mozjemalloc's run lifecycle, checked through the public
// API only. The process runs with that RUNSEL_CONF (tests/meson.build).
// - An emptied small run goes back to the arena at once: no kept run.
// - A new page run (a small run or a large allocation) takes the best fit
//   among all free page runs, smallest first, then lowest address, whatever
//   class last held the pages; free runs coalesce; an emptied chunk becomes
//   the one spare, used only when nothing else fits.
// The placement test is differential: before every allocation that may make
// a page run, a model reads the arena's page maps (runsel_chunk_maps) and
// predicts where the run must go.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "runsel.h"
#include "support/seeds.h"

namespace {

constexpr std::size_t kPage = 4096;

bool is_free(unsigned char code) { return code == RUNSEL_PAGE_FREE || code == RUNSEL_PAGE_DIRTY; }

// The page maps of every chunk, read without allocating once `maps` has room.
struct PageMaps {
  std::vector<runsel_chunk_map> maps = std::vector<runsel_chunk_map>(4096);
  std::size_t count = 0;
  void read() {
    count = runsel_chunk_maps(maps.data(), maps.size());
    ASSERT_LE(count, maps.size()) << "more chunks than the test reads";
  }
};

// Where mozjemalloc's rule puts a run of `pages` pages: the smallest free page
// run that fits, lowest address first, in a chunk that is not the spare (all
// usable pages free); else the spare's first usable page; else 0 (a new chunk).
std::uintptr_t predicted_run(const PageMaps& m, std::size_t pages) {
  std::size_t best_size = SIZE_MAX;
  std::uintptr_t best = 0, spare = 0;
  for (std::size_t c = 0; c < m.count; ++c) {
    const runsel_chunk_map& map = m.maps[c];
    std::size_t first_usable = 0, free_pages = 0, usable = 0;
    while (first_usable < RUNSEL_PAGES_PER_CHUNK && map.pages[first_usable] == RUNSEL_PAGE_RESERVED)
      ++first_usable;
    for (std::size_t p = first_usable; p < RUNSEL_PAGES_PER_CHUNK; ++p) {
      ++usable;
      free_pages += is_free(map.pages[p]);
    }
    if (free_pages == usable) {
      if (spare == 0) spare = map.address + first_usable * kPage;
      continue;
    }
    for (std::size_t p = first_usable; p < RUNSEL_PAGES_PER_CHUNK;) {
      if (!is_free(map.pages[p])) {
        ++p;
        continue;
      }
      std::size_t end = p;
      while (end < RUNSEL_PAGES_PER_CHUNK && is_free(map.pages[end])) ++end;
      const std::size_t size = end - p;
      const std::uintptr_t address = map.address + p * kPage;
      if (size >= pages && (size < best_size || (size == best_size && address < best))) {
        best_size = size;
        best = address;
      }
      p = end;
    }
  }
  return best != 0 ? best : spare;
}

// The largest size classes no run of this process holds, largest first.
std::vector<std::size_t> unused_classes(const runsel_stats_t& s) {
  std::vector<std::size_t> found;
  for (std::size_t i = s.bin_count; i-- > 0;) {
    if (s.bins[i].runs == 0) found.push_back(i);
  }
  return found;
}

TEST(AsBuilt, TheProfileIsInForce) {
  EXPECT_STREQ(runsel_profile(), "as_built") << "tests/meson.build runs this test with "
                                                "RUNSEL_CONF=profile:as_built";
  EXPECT_STREQ(runsel_purge_policy(), "budget");
}

TEST(AsBuilt, AnEmptiedRunIsHandedBackAtOnce) {
  runsel_stats_t before;
  runsel_stats(&before);
  const std::vector<std::size_t> unused = unused_classes(before);
  ASSERT_FALSE(unused.empty());
  const std::size_t bin = unused[0];
  void* p = std::malloc(before.bins[bin].size);
  ASSERT_NE(p, nullptr);
  runsel_stats_t during;
  runsel_stats(&during);
  EXPECT_EQ(during.bins[bin].runs, 1u);
  std::free(p);
  runsel_stats_t after;
  runsel_stats(&after);
  EXPECT_EQ(after.bins[bin].runs, 0u) << "the emptied run went back to the arena";
  EXPECT_EQ(after.bins[bin].empty_runs, 0u) << "no kept empty run";
  EXPECT_EQ(runsel_check(), 0);
}

// The pages a run of one class gave back serve a run of another class: no
// class tags keep them apart.
TEST(AsBuilt, PagesAnotherClassHeldAreReused) {
  runsel_stats_t s;
  runsel_stats(&s);
  // Two unused classes, b's runs no larger than a's.
  const std::vector<std::size_t> unused = unused_classes(s);
  ASSERT_GE(unused.size(), 2u);
  std::size_t bin_a = unused[0], bin_b = unused[1];
  if (s.bins[bin_b].bytes_per_run > s.bins[bin_a].bytes_per_run) std::swap(bin_a, bin_b);
  const std::size_t a = s.bins[bin_a].size, b = s.bins[bin_b].size;
  PageMaps maps;
  maps.read();
  const std::uintptr_t expected = predicted_run(maps, s.bins[bin_a].bytes_per_run / kPage);
  void* p = std::malloc(a);
  ASSERT_NE(p, nullptr);
  const std::uintptr_t run_a = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
  if (expected != 0) {
    EXPECT_EQ(run_a, expected);
  }
  std::free(p);
  maps.read();
  const std::uintptr_t expected_b = predicted_run(maps, s.bins[bin_b].bytes_per_run / kPage);
  void* q = std::malloc(b);
  ASSERT_NE(q, nullptr);
  const std::uintptr_t run_b = reinterpret_cast<std::uintptr_t>(q) & ~(kPage - 1);
  EXPECT_EQ(run_b, expected_b);
  EXPECT_EQ(run_b, run_a) << "the pages class " << a << " gave back serve class " << b;
  std::free(q);
  EXPECT_EQ(runsel_check(), 0);
}

// Seeded random large allocations and frees of 2 to 24 pages: each
// allocation lands where the model says, whenever a free run fits.
TEST(AsBuilt, EveryPageRunTakesTheLowestBestFit) {
  for (std::uint64_t seed : runsel_test::test_seeds(8)) {
    std::mt19937_64 random(seed);
    std::vector<std::pair<void*, std::size_t>> live;
    live.reserve(4096);
    PageMaps maps;
    const std::size_t operations = runsel_test::scaled(3000);
    for (std::size_t i = 0; i < operations; ++i) {
      if (!live.empty() && random() % 100 < 45) {
        const std::size_t k = random() % live.size();
        std::free(live[k].first);
        live[k] = live.back();
        live.pop_back();
        continue;
      }
      const std::size_t pages = 2 + random() % 23;  // large: above every small class
      maps.read();
      const std::uintptr_t expected = predicted_run(maps, pages);
      void* p = std::malloc(pages * kPage);
      ASSERT_NE(p, nullptr);
      if (expected != 0) {
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p), expected)
            << runsel_test::replay_hint(seed) << ", operation " << i << ": " << pages << " pages";
      }
      live.push_back({p, pages});
    }
    for (auto& [p, pages] : live) std::free(p);
    ASSERT_EQ(runsel_check(), 0) << runsel_test::replay_hint(seed);
  }
}

}  // namespace
