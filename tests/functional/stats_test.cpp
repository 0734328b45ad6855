// Stats: the exact identity after seeded random workloads, per-bin figures, purging and RSS.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/child.h"
#include "support/heap.h"
#include "support/seeds.h"

namespace {

using runsel_test::kMiB;
using runsel_test::kPage;
using runsel_test::mallocs_between;
using runsel_test::opaque;
using runsel_test::resident_bytes;
using runsel_test::snapshot;
using runsel_test::splitmix;

// The shared identity check, also saying by how much the two sides differ.
testing::AssertionResult IdentityHolds(const runsel_stats_t& s) {
  testing::AssertionResult result = runsel_test::IdentityHolds(s);
  if (!result)
    result << " (committed - sum = "
           << static_cast<long long>(s.committed - runsel_test::identity_sum(s)) << ")";
  return result;
}

// Figures that must agree with each other at any quiescent point.
testing::AssertionResult FiguresConsistent(const runsel_stats_t& s) {
  size_t bin_unused = 0, small = 0;
  for (size_t i = 0; i < s.bin_count; ++i) {
    const runsel_bin_stats& b = s.bins[i];
    auto fail = [&] {
      return testing::AssertionFailure() << "bin " << i << " (size " << b.size << "): ";
    };
    if (b.runs * b.regions_per_run < b.regions_in_use)
      return fail() << "more regions in use than exist";
    size_t free_regions = b.runs * b.regions_per_run - b.regions_in_use;
    if (b.unused_bytes != free_regions * b.size)
      return fail() << "unused_bytes " << b.unused_bytes << " != " << free_regions
                    << " free regions x size";
    if (b.nonfull_runs > b.runs)
      return fail() << "nonfull_runs " << b.nonfull_runs << " > runs " << b.runs;
    // Every run with a free region is in the container, except the bin's kept
    // empty runs (one per arena at most), which are outside it.
    if (b.empty_runs > b.runs - b.nonfull_runs || b.empty_runs > s.narenas)
      return fail() << b.empty_runs << " kept empty runs, " << b.runs << " runs, " << b.nonfull_runs
                    << " non-full";
    if (free_regions < b.empty_runs * b.regions_per_run)
      return fail() << "fewer free regions than the kept empty runs hold";
    const size_t free_in_nonfull = free_regions - b.empty_runs * b.regions_per_run;
    if (free_in_nonfull < b.nonfull_runs ||
        free_in_nonfull > b.nonfull_runs * (b.regions_per_run - 1))
      return fail() << free_in_nonfull << " free regions in " << b.nonfull_runs
                    << " non-full runs of " << b.regions_per_run;
    if (b.regions_per_run < 2 || b.bytes_per_run % kPage != 0 ||
        b.regions_per_run * b.size > b.bytes_per_run)
      return fail() << "run geometry " << b.regions_per_run << " x " << b.size << " in "
                    << b.bytes_per_run;
    bin_unused += b.unused_bytes;
    small += b.regions_in_use * b.size;
  }
  if (bin_unused != s.bin_unused)
    return testing::AssertionFailure() << "bins sum to " << bin_unused << " unused";
  if (small != s.small_allocated)
    return testing::AssertionFailure() << "bins hold " << small << " small bytes";
  if (s.small_allocated + s.large_allocated + s.huge_allocated != s.allocated)
    return testing::AssertionFailure() << "small + large + huge != allocated";
  if (s.committed > s.mapped) return testing::AssertionFailure() << "committed > mapped";
  if (s.nfree > s.nmalloc) return testing::AssertionFailure() << "nfree > nmalloc";
  return testing::AssertionSuccess();
}

// Mostly small, some large, a few huge, like a real program.
size_t random_size(uint64_t& rng) {
  uint64_t r = splitmix(rng);
  unsigned kind = r % 1000;
  r >>= 10;
  if (kind < 800) return 1 + r % 3840;
  if (kind < 970) return 3841 + r % (64 * 1024);
  if (kind < 995) return 64 * 1024 + r % (1032192 - 64 * 1024);
  return 1032193 + r % (3 * kMiB);
}

struct Block {
  unsigned char* p;
  size_t size;
  unsigned char tag;
};

void mark(Block& b) {
  size_t n = b.size < 16 ? b.size : 16;
  memset(b.p, b.tag, n);
  memset(b.p + b.size - n, b.tag, n);
}
bool marked(const Block& b) {
  size_t n = b.size < 16 ? b.size : 16;
  for (size_t i = 0; i < n; ++i)
    if (b.p[i] != b.tag || b.p[b.size - n + i] != b.tag) return false;
  return true;
}

void RunRandomWorkload(uint64_t seed, size_t steps) {
  SCOPED_TRACE(runsel_test::replay_hint(seed));
  std::vector<Block> live;
  live.reserve(4096);
  const runsel_stats_t start = snapshot();
  uint64_t rng = seed;
  for (size_t step = 1; step <= steps; ++step) {
    uint64_t action = splitmix(rng) % 100;
    if (live.size() < 64 || (action < 55 && live.size() < 3000)) {
      Block b{static_cast<unsigned char*>(opaque(malloc(random_size(rng)))), 0,
              static_cast<unsigned char>(step)};
      b.size = malloc_usable_size(b.p);
      ASSERT_NE(b.p, nullptr);
      mark(b);
      live.push_back(b);
    } else if (action < 85) {
      size_t index = splitmix(rng) % live.size();
      ASSERT_TRUE(marked(live[index]))
          << "block of " << live[index].size << " bytes was overwritten";
      free(live[index].p);
      live[index] = live.back();
      live.pop_back();
    } else {
      Block& b = live[splitmix(rng) % live.size()];
      size_t new_size = random_size(rng);
      size_t keep = b.size < new_size ? b.size : new_size;
      keep = keep < 16 ? keep : 16;
      auto* q = static_cast<unsigned char*>(opaque(realloc(b.p, new_size)));
      ASSERT_NE(q, nullptr);
      for (size_t i = 0; i < keep; ++i) ASSERT_EQ(q[i], b.tag) << "realloc lost contents";
      b = Block{q, malloc_usable_size(q), static_cast<unsigned char>(step)};
      mark(b);
    }
    if (step % 2500 == 0) {
      runsel_stats_t s = snapshot();
      ASSERT_TRUE(IdentityHolds(s)) << "after step " << step;
      ASSERT_TRUE(FiguresConsistent(s)) << "after step " << step;
      ASSERT_EQ(runsel_check(), 0) << "after step " << step;
    }
  }
  for (const Block& b : live) {
    ASSERT_TRUE(marked(b));
    free(b.p);
  }
  live.clear();
  runsel_stats_t end = snapshot();
  EXPECT_TRUE(IdentityHolds(end)) << "after freeing everything";
  EXPECT_TRUE(FiguresConsistent(end)) << "after freeing everything";
  EXPECT_EQ(runsel_check(), 0) << "after freeing everything";
  EXPECT_EQ(end.allocated, start.allocated) << "everything was freed";
  EXPECT_EQ(end.huge_count, start.huge_count);
  EXPECT_LE(end.dirty, runsel_test::dirty_bound(end)) << "the purge policy bounds dirty pages";
}

TEST(Stats, IdentityHoldsAfterSeededRandomWorkloads) {
  const size_t steps = 40000;
  for (uint64_t seed : runsel_test::test_seeds(3)) {
    RunRandomWorkload(seed, steps);
    if (HasFatalFailure()) return;
  }
}

TEST(Stats, IdentityHoldsWhenQuiet) {
  runsel_stats_t s = snapshot();
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_TRUE(FiguresConsistent(s));
  EXPECT_EQ(runsel_check(), 0);
  EXPECT_EQ(s.dirty_max, 256 * kPage);
  EXPECT_GE(s.narenas, 1u);
}

// A run header's free count (the 2 bytes after the 8-byte bin pointer, and the
// 24-byte container hook with -Dhook_placement=run_header) changed behind the
// allocator's back: runsel_check() fails, and its line names the run, its bin
// and both figures.
TEST(RunselCheck, NamesTheRunWhoseFreeCountDisagreesWithItsBitmap) {
#if RUNSEL_HOOKS_IN_PAGE_MAP
  constexpr size_t kFreeCountOffset = 8;
#else
  constexpr size_t kFreeCountOffset = 32;
#endif
  void* block = opaque(malloc(16));  // runs of 16-byte regions are one page
  char* run = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(block) & ~uintptr_t{kPage - 1});
  uint16_t count = 0;
  memcpy(&count, run + kFreeCountOffset, sizeof(count));
  const uint16_t wrong = static_cast<uint16_t>(count + 1);
  const runsel_test::ChildOutcome outcome = runsel_test::run_in_child([&] {
    memcpy(run + kFreeCountOffset, &wrong, sizeof(wrong));
    _exit(runsel_check() == -1 ? 0 : 1);
  });
  free(block);
  char expected[160];
  snprintf(expected, sizeof(expected),
           ": run %p (bin 0): free count %u, but its bitmap has %u free regions\n",
           static_cast<void*>(run), unsigned{wrong}, unsigned{count});
  ASSERT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0)
      << "runsel_check() did not fail; it wrote: " << outcome.err;
  EXPECT_EQ(outcome.err.rfind("runsel: check: arena ", 0), 0u) << outcome.err;
  EXPECT_NE(outcome.err.find(expected), std::string::npos) << outcome.err;
}

TEST(Stats, EveryClassCountsExactly) {
  for (size_t i = 0; i < snapshot().bin_count; ++i) {
    runsel_stats_t before = snapshot();
    size_t size = before.bins[i].size;
    void* p = opaque(malloc(size));
    runsel_stats_t after = snapshot();
    EXPECT_EQ(after.allocated - before.allocated, size);
    EXPECT_EQ(after.small_allocated - before.small_allocated, size);
    EXPECT_EQ(after.bins[i].regions_in_use - before.bins[i].regions_in_use, 1u);
    EXPECT_EQ(mallocs_between(before, after), 1u);
    EXPECT_TRUE(IdentityHolds(after));
    free(p);
    runsel_stats_t freed = snapshot();
    EXPECT_EQ(freed.allocated, before.allocated);
    EXPECT_EQ(freed.nfree - after.nfree, 1u);
    EXPECT_TRUE(IdentityHolds(freed));
  }
  // Large and huge sizes (8,000: above the 7 KiB class of -Dclasses48 too).
  for (size_t size :
       {size_t{8000}, size_t{400000}, size_t{1032192}, size_t{1032193}, 3 * kMiB + 7}) {
    runsel_stats_t before = snapshot();
    void* p = opaque(malloc(size));
    runsel_stats_t after = snapshot();
    EXPECT_EQ(after.allocated - before.allocated, runsel_good_size(size)) << size;
    bool huge = size > 1032192;
    EXPECT_EQ((huge ? after.huge_allocated - before.huge_allocated
                    : after.large_allocated - before.large_allocated),
              runsel_good_size(size))
        << size;
    EXPECT_EQ(after.huge_count - before.huge_count, huge ? 1u : 0u);
    EXPECT_TRUE(IdentityHolds(after)) << size;
    free(p);
    EXPECT_TRUE(IdentityHolds(snapshot())) << size;
  }
}

// Writes 64 MiB of large blocks and frees them; returns the resident bytes
// before they were allocated and at their peak.
void WriteAndFreeLargeBlocks(size_t* base, size_t* peak, size_t* purges_before_frees) {
  constexpr size_t kBlock = 256 * 1024, kCount = 256;  // 64 MiB
  std::vector<char*> blocks;
  blocks.reserve(kCount);
  runsel_free_dirty_pages();
  *base = resident_bytes();
  for (size_t i = 0; i < kCount; ++i) {
    char* p = static_cast<char*>(opaque(malloc(kBlock)));
    ASSERT_NE(p, nullptr);
    for (size_t off = 0; off < kBlock; off += kPage) p[off] = static_cast<char>(i + 1);
    blocks.push_back(p);
  }
  *peak = resident_bytes();
  ASSERT_GE(*peak, *base + 32 * kMiB) << "the blocks were written, so they are resident";
  *purges_before_frees = snapshot().purges;
  for (char* p : blocks) free(p);
}

// The purge policy in force gives freed pages back: at once under "budget";
// under "deferred" within its hard bound at once and entirely once the
// program asks (runsel_purge_now); under "decay" nothing at once, everything
// once its window (RUNSEL_CONF decay_ms, which the decay run sets short) has
// passed.
TEST(Stats, PurgePolicyLowersResidentMemory) {
  const std::string policy = runsel_purge_policy();
  const size_t purges = snapshot().purges;
  size_t base = 0, peak = 0, purges_before_frees = 0;
  WriteAndFreeLargeBlocks(&base, &peak, &purges_before_frees);
  if (HasFatalFailure()) return;
  runsel_stats_t s = snapshot();
  EXPECT_LE(s.dirty, runsel_test::dirty_bound(s)) << policy;
  EXPECT_TRUE(IdentityHolds(s));
  if (policy == "deferred") {
    EXPECT_GT(runsel_purge_now(), 0u) << "the frees queued a purge";
  } else if (policy == "decay") {
    // (Chunks beyond the arena's spares are unmapped, or purged if they keep
    // class tags, at once; that is not a purge of the policy.)
    EXPECT_EQ(s.purges, purges_before_frees) << "decay purges nothing at once";
    EXPECT_GT(s.dirty, 0u);
    const char* conf = getenv("RUNSEL_CONF");
    const char* window = conf ? strstr(conf, "decay_ms:") : nullptr;
    ASSERT_NE(window, nullptr) << "the decay run sets a short window in RUNSEL_CONF";
    const long window_ms = strtol(window + strlen("decay_ms:"), nullptr, 10);
    ASSERT_LE(window_ms, 2000) << "a window the test can wait for";
    usleep(static_cast<useconds_t>(window_ms) * 1000 * 5 / 4);
    runsel_purge_now();  // what a later allocation would also do
  }
  const size_t after = resident_bytes();
  s = snapshot();
  EXPECT_LE(after, base + 4 * kMiB)
      << policy << ": base " << base / 1024 << " KiB, peak " << peak / 1024 << " KiB, after "
      << after / 1024 << " KiB, dirty " << s.dirty / 1024 << " KiB";
  EXPECT_LE(s.dirty, s.dirty_max * s.narenas) << policy;
  EXPECT_GT(s.purges, purges);
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_EQ(runsel_check(), 0);
}

TEST(Stats, FreeDirtyPagesReleasesEmptiedSmallRuns) {
  constexpr size_t kObject = 64, kCount = 32 * kMiB / kObject;
  std::vector<void*> objects(kCount, nullptr);  // 4 MiB, resident before the base line
  runsel_free_dirty_pages();
  const size_t base = resident_bytes();
  for (size_t i = 0; i < kCount; ++i) {
    objects[i] = opaque(malloc(kObject));
    ASSERT_NE(objects[i], nullptr);
    memset(objects[i], static_cast<int>(i), kObject);
  }
  const size_t peak = resident_bytes();
  ASSERT_GE(peak, base + 16 * kMiB) << "the objects were written, so they are resident";
  for (void* p : objects) free(p);
  runsel_thread_cache_flush();  // the regions a thread cache kept, back to their runs
  runsel_free_dirty_pages();
  const size_t after = resident_bytes();
  runsel_stats_t s = snapshot();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_LE(after, base + (peak - base) / 8)
      << "base " << base / 1024 << " KiB, peak " << peak / 1024 << " KiB, after " << after / 1024
      << " KiB";
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_TRUE(FiguresConsistent(s));
  EXPECT_EQ(runsel_check(), 0);
}

}  // namespace

namespace {

// A freed huge block's mapping is kept, its pages as they were, and serves the
// next huge request: same address, no new mapping; calloc still reads zero;
// every figure is exact throughout; runsel_free_dirty_pages unmaps the cache.
TEST(Stats, HugeCacheReusesMappings) {
  if (std::string(runsel_profile()) == "as_built")
    GTEST_SKIP() << "the as-built profile has no huge mapping cache (mozjemalloc purges "
                    "the huge chunks it recycles)";
  constexpr size_t kFirst = 5 * kMiB + 123, kSecond = 3 * kMiB;
  runsel_free_dirty_pages();
  runsel_stats_t s = snapshot();
  ASSERT_EQ(s.huge_cached, 0u);
  const size_t mapped_before = s.mapped;
  char* p = static_cast<char*>(opaque(malloc(kFirst)));
  ASSERT_NE(p, nullptr);
  memset(p, 0xab, kFirst);
  free(p);
  s = snapshot();
  EXPECT_EQ(s.huge_cached, 6 * kMiB) << "kept, not unmapped";
  EXPECT_EQ(s.huge_dirty, 5 * kMiB + kPage) << "its written pages stay committed, as dirty";
  EXPECT_EQ(s.mapped, mapped_before + 6 * kMiB);
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_EQ(runsel_check(), 0);

  char* q = static_cast<char*>(opaque(calloc(1, kSecond)));
  ASSERT_EQ(q, p) << "the cached mapping served the next huge request";
  bool zero = true;
  for (size_t i = 0; i < kSecond; ++i) zero &= q[i] == 0;
  EXPECT_TRUE(zero) << "calloc on a reused mapping reads zero";
  s = snapshot();
  EXPECT_EQ(s.huge_cached, 0u);
  EXPECT_EQ(s.huge_dirty, 2 * kMiB + kPage) << "written pages past the new usable size";
  EXPECT_EQ(malloc_usable_size(q), kSecond);
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_EQ(runsel_check(), 0);

  free(q);
  runsel_free_dirty_pages();
  s = snapshot();
  EXPECT_EQ(s.huge_cached, 0u);
  EXPECT_EQ(s.huge_dirty, 0u);
  EXPECT_EQ(s.mapped, mapped_before);
  EXPECT_TRUE(IdentityHolds(s));
}

}  // namespace

namespace {

// glibc's introspection calls answer with runsel's figures: mallinfo2 splits
// the identity (arena = uordblks + fordblks, exactly), malloc_trim gives back
// what runsel keeps for reuse, malloc_info writes the figures as XML,
// malloc_stats prints them, mallopt refuses glibc's tunables.
TEST(GlibcIntrospection, Mallinfo2IsRunselsIdentity) {
  std::vector<void*> blocks;
  for (size_t size : {size_t{40}, size_t{3000}, size_t{70000}, 3 * kMiB})
    blocks.push_back(opaque(malloc(size)));
  const runsel_stats_t s = snapshot();
  const struct mallinfo2 info = mallinfo2();
  EXPECT_EQ(info.arena, s.committed);
  EXPECT_EQ(info.uordblks, s.allocated + s.waste + s.bookkeeping);
  EXPECT_EQ(info.fordblks, s.dirty + s.bin_unused);
  EXPECT_EQ(info.arena, info.uordblks + info.fordblks);
  EXPECT_EQ(info.hblks, s.huge_count);
  EXPECT_EQ(info.hblkhd, s.huge_allocated);
  EXPECT_EQ(info.fsmblks, s.bin_unused);
  EXPECT_EQ(info.keepcost, s.dirty);
  EXPECT_GE(info.hblks, 1u);
  for (void* p : blocks) free(p);
}

TEST(GlibcIntrospection, MallocTrimGivesBackKeptRunsAndDirtyPages) {
  std::vector<void*> blocks;
  for (int i = 0; i < 2000; ++i) blocks.push_back(opaque(malloc(i % 2 ? 48 : 8000)));
  for (void* p : blocks) free(p);
  runsel_thread_cache_flush();  // the regions a thread cache kept, back to their runs
  EXPECT_EQ(malloc_trim(0), 1) << "something was kept for reuse, so trimming gives it back";
  const runsel_stats_t s = snapshot();
  EXPECT_EQ(s.dirty, 0u);
  for (const runsel_bin_stats& bin : s.bins) EXPECT_EQ(bin.empty_runs, 0u) << bin.size;
  EXPECT_EQ(malloc_trim(0), 0) << "nothing left to give back";
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_EQ(runsel_check(), 0);
}

TEST(GlibcIntrospection, MallocInfoWritesRunselsFiguresAsXml) {
  char* text = nullptr;
  size_t length = 0;
  FILE* out = open_memstream(&text, &length);
  ASSERT_NE(out, nullptr);
  void* block = opaque(malloc(100));
  ASSERT_EQ(malloc_info(0, out), 0);
  fclose(out);
  const runsel_stats_t s = snapshot();
  const std::string xml(text, length);
  free(text);
  free(block);
  EXPECT_EQ(
      xml.rfind(std::string("<malloc version=\"runsel-1\" variant=\"") + runsel_variant() + "\">\n",
                0),
      0u)
      << xml;
  EXPECT_NE(xml.find("<total type=\"committed\" size=\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<bin size=\"112\" runs=\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("</malloc>\n"), std::string::npos) << xml;
  EXPECT_EQ(static_cast<size_t>(std::count(xml.begin(), xml.end(), '\n')),
            1 + 8 + 3 + s.bin_count + 2)
      << xml;
  EXPECT_GE(s.allocated, 112u);
  errno = 0;
  EXPECT_EQ(malloc_info(1, stdout), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(GlibcIntrospection, MallocStatsPrintsRunselsIdentity) {
  testing::internal::CaptureStderr();
  malloc_stats();
  const std::string text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(text.rfind(std::string("runsel (") + runsel_variant() + "): ", 0), 0u) << text;
  EXPECT_NE(text.find("system bytes     = "), std::string::npos) << text;
  EXPECT_NE(text.find("= allocated "), std::string::npos) << text;
}

TEST(GlibcIntrospection, MalloptRefusesGlibcTunables) {
  EXPECT_EQ(mallopt(M_ARENA_MAX, 1), 0);
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, 1 << 20), 0);
}

}  // namespace
