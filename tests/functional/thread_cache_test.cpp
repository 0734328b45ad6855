// The thread cache (-Dthread_cache=true; the setting-tcache-<container>
// libraries): run against a library that has it. Double frees of cached and
// of flushed regions abort naming the pointer, a foreign pointer is refused
// before it enters the cache, a thread's exit gives its cache back, idle
// classes are given back by the GC, and a seeded differential test against a
// model of the cache's stacks and of the live blocks.
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/seeds.h"

// The double frees below are the point.
#pragma GCC diagnostic ignored "-Wuse-after-free"

namespace {

using runsel_test::opaque;

// The most regions a class's stack holds once its bound grew
// (thread_cache::kMaxGrownSlots), and the bytes a thread's grown bounds may
// add (kGrowBudget).
constexpr size_t kMaxSlots = 2048;
constexpr size_t kGrowBudget = 512 * 1024;
// The GC gives idle regions back only while a thread holds more than this
// (thread_cache::kIdleBytes).
constexpr size_t kIdleBytes = 512 * 1024;

// A class's first bound: twice the regions of its run, within [20, 200].
size_t first_bound(size_t bin) {
  runsel_stats_t s;
  runsel_stats(&s);
  return std::clamp<size_t>(2 * s.bins[bin].regions_per_run, 20, 200);
}

// The class index of `size` (a small size), from the library's own table.
size_t class_of(size_t size) {
  static runsel_stats_t s;
  runsel_stats(&s);
  for (size_t b = 0; b < s.bin_count; ++b)
    if (s.bins[b].size >= size) return b;
  return s.bin_count;
}

// The regions of class `bin` the calling thread's cache holds, oldest first.
// Read into a static buffer: a vector of kMaxSlots would be a large block,
// which the fast profile keeps in its arena's freed large runs once freed,
// and thread_cached counts those too.
std::vector<void*> cached(size_t bin) {
  static void* slots[kMaxSlots];
  const size_t n = runsel_thread_cache_slots(bin, slots, kMaxSlots);
  return std::vector<void*>(slots, slots + std::min(n, kMaxSlots));
}

// How many regions of class `bin` the calling thread's cache holds.
size_t cached_count(size_t bin) { return runsel_thread_cache_slots(bin, nullptr, 0); }

size_t thread_cached() {
  runsel_stats_t s;
  runsel_stats(&s);
  return s.thread_cached;
}

std::string pointer_text(const void* p) {
  char text[32];
  snprintf(text, sizeof text, "%p", p);
  return text;
}

void no_core_dump() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

class ThreadCache : public testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "fast");  // the child has this cache
    void* p = opaque(malloc(64));
    free(p);
    ASSERT_EQ(cached(class_of(64)).empty(), false) << "this library has no thread cache";
  }
};

TEST_F(ThreadCache, DoubleFreeOfACachedRegionAborts) {
  void* p = opaque(malloc(64));
  free(p);
  ASSERT_EQ(cached(class_of(64)).back(), p);
  EXPECT_EXIT((no_core_dump(), free(opaque(p))), testing::KilledBySignal(SIGABRT),
              "runsel: free\\(" + pointer_text(p) + "\\): double free of a small region\n");
  EXPECT_EXIT((no_core_dump(), opaque(realloc(opaque(p), 70))), testing::KilledBySignal(SIGABRT),
              "runsel: realloc\\(" + pointer_text(p) + "\\): double free of a small region\n");
}

TEST_F(ThreadCache, DoubleFreeFromAnotherThreadOfARegionCachedHereAborts) {
  void* p = opaque(malloc(64));
  free(p);
  EXPECT_EXIT((no_core_dump(), std::thread([p] { free(opaque(p)); }).join()),
              testing::KilledBySignal(SIGABRT),
              "runsel: free\\(" + pointer_text(p) + "\\): double free of a small region\n");
}

TEST_F(ThreadCache, DoubleFreeOfAFlushedRegionAborts) {
  void* p = opaque(malloc(64));
  free(p);
  runsel_thread_cache_flush();
  EXPECT_TRUE(cached(class_of(64)).empty());
  EXPECT_EXIT((no_core_dump(), free(opaque(p))), testing::KilledBySignal(SIGABRT),
              "runsel: free\\(" + pointer_text(p) + "\\): double free of a small region\n");
}

// The fast profile's stacks of freed large runs (1 to 4 pages, 8 of each
// length: thread_cache::kLargeDepth): the freeing thread reuses them, any
// arena's, and gives back what does not fit, and its exit gives back the rest.
constexpr size_t kLargeDepth = 8;
constexpr size_t kPage = 4096;

bool caches_large_runs() { return std::string(runsel_build_profile()) == "fast"; }

TEST_F(ThreadCache, AFreedLargeRunIsTheThreadsNextOfItsLength) {
  if (!caches_large_runs()) GTEST_SKIP() << "only the fast profile caches large runs";
  std::thread([] {
    for (size_t pages = 1; pages <= 4; ++pages) {
      const size_t size = pages * kPage - 100;  // no small class holds it
      unsigned char* p = static_cast<unsigned char*>(opaque(malloc(size)));
      ASSERT_NE(p, nullptr);
      std::memset(p, 0xab, size);
      const size_t before = thread_cached();
      free(p);
      EXPECT_EQ(thread_cached() - before, pages * kPage) << pages << " pages";
      EXPECT_EQ(malloc_usable_size(p), 0u) << "a cached run is free to the program";
      EXPECT_EQ(runsel_check(), 0);
      unsigned char* q = static_cast<unsigned char*>(opaque(calloc(1, size)));
      EXPECT_EQ(q, p) << pages << " pages";
      EXPECT_EQ(std::count(q, q + size, 0), static_cast<long>(size)) << "calloc from the cache";
      EXPECT_EQ(malloc_usable_size(q), pages * kPage);
      free(q);
    }
  }).join();
  EXPECT_EQ(runsel_check(), 0);
}

TEST_F(ThreadCache, LargeRunsBeyondTheDepthAreGivenBack) {
  if (!caches_large_runs()) GTEST_SKIP() << "only the fast profile caches large runs";
  std::thread([] {
    void* runs[3 * kLargeDepth];
    for (void*& p : runs) p = opaque(malloc(2 * kPage));
    for (void* p : runs) free(p);
    EXPECT_EQ(runsel_check(), 0);  // (which checks the depth)
    // Each full stack gave its older half back: the newest kLargeDepth stay,
    // and come back newest first.
    for (size_t i = 0; i < kLargeDepth; ++i) {
      void* q = opaque(malloc(2 * kPage));
      EXPECT_EQ(q, runs[3 * kLargeDepth - 1 - i]) << i;
    }
    // The rest went back to the arena: the next comes from elsewhere.
    void* next = opaque(malloc(2 * kPage));
    EXPECT_EQ(std::count(runs + 2 * kLargeDepth, runs + 3 * kLargeDepth, next), 0);
    for (size_t i = 0; i < kLargeDepth; ++i) free(runs[3 * kLargeDepth - 1 - i]);
    free(next);
  }).join();
  EXPECT_EQ(runsel_check(), 0);
}

// A run another thread allocated: cached by the thread that frees it, reused
// there, and given back to its arena when that thread exits.
TEST_F(ThreadCache, ARemoteLargeRunIsCachedByTheFreeingThread) {
  if (!caches_large_runs()) GTEST_SKIP() << "only the fast profile caches large runs";
  void* runs[4];
  for (void*& p : runs) p = opaque(malloc(3 * kPage));
  std::thread([&] {
    free(opaque(malloc(16)));  // this thread's cache
    for (void* p : runs) free(p);
    EXPECT_EQ(runsel_check(), 0);
    void* q = opaque(malloc(3 * kPage - 8));
    EXPECT_EQ(q, runs[3]);
    free(q);
  }).join();
  EXPECT_EQ(runsel_check(), 0);
  // Given back at the thread's exit: no thread's cache holds them.
  for (void* p : runs) EXPECT_EQ(malloc_usable_size(p), 0u) << p;
}

TEST_F(ThreadCache, DoubleFreeOfACachedLargeRunAborts) {
  if (!caches_large_runs()) GTEST_SKIP() << "only the fast profile caches large runs";
  void* p = opaque(malloc(2 * kPage));
  free(p);
  const std::string message =
      "\\): double free of a large allocation \\(its run is in a thread's "
      "cache of freed runs\\)\n";
  EXPECT_EXIT((no_core_dump(), free(opaque(p))), testing::KilledBySignal(SIGABRT),
              "runsel: free\\(" + pointer_text(p) + message);
  EXPECT_EXIT((no_core_dump(), opaque(realloc(opaque(p), 3 * kPage))),
              testing::KilledBySignal(SIGABRT), "runsel: realloc\\(" + pointer_text(p) + message);
  // From a thread without a cache: the search covers every thread's.
  EXPECT_EXIT((no_core_dump(), std::thread([p] { free(opaque(p)); }).join()),
              testing::KilledBySignal(SIGABRT), "runsel: free\\(" + pointer_text(p) + message);
}

// A region handed out holds no key (the word a free looks at first), also the
// first region of a fill, which came back from a flush with the key the cache
// wrote: with the key, each free of such a region the program had not
// overwritten searched every thread's cache (regression: simple_loop spent 39 %
// of its instructions there).
TEST_F(ThreadCache, AFillHandsOutNoKey) {
  // Reserved before the blocks: nothing the test keeps may take their class.
  std::vector<void*> blocks(2 * kMaxSlots);
  std::vector<std::pair<void*, uintptr_t>> keys;
  keys.reserve(blocks.size());
  for (void*& p : blocks) p = opaque(malloc(48));
  for (void* p : blocks) free(p);
  // The key of each region still cached, read off it (whatever the key is
  // made of): not the word the program left there (0 here). The stack holds
  // its last bound's worth; the older ones went back already.
  for (void* p : blocks) {
    const uintptr_t word = *static_cast<volatile uintptr_t*>(p);
    if (word != 0) keys.emplace_back(p, word);
  }
  ASSERT_GE(keys.size(), 20u) << "the cache holds no keyed region";
  std::sort(keys.begin(), keys.end());
  runsel_thread_cache_flush();  // every region back in its run, its key kept
  std::size_t met = 0;
  for (void*& p : blocks) {  // the first comes from a fill
    p = opaque(malloc(48));
    const auto key = std::lower_bound(keys.begin(), keys.end(), std::pair(p, uintptr_t{0}));
    if (key == keys.end() || key->first != p) continue;
    ++met;
    EXPECT_NE(*static_cast<uintptr_t*>(p), key->second)
        << "malloc handed out " << p << " with its key";
  }
  EXPECT_GT(met, keys.size() / 2) << "the regions flushed did not come back";
  for (void* p : blocks) free(p);
  EXPECT_EQ(runsel_check(), 0);
}

TEST_F(ThreadCache, ForeignAndInteriorPointersNeverEnterTheCache) {
  static char outside[64];
  EXPECT_EXIT((no_core_dump(), free(opaque(outside + 16))), testing::KilledBySignal(SIGABRT),
              "not allocated by runsel");
  char* p = static_cast<char*>(opaque(malloc(64)));
  EXPECT_EXIT((no_core_dump(), free(opaque(p + 16))), testing::KilledBySignal(SIGABRT),
              "not the start of a small region");
  const std::vector<void*> before = cached(class_of(64));
  EXPECT_EQ(std::count(before.begin(), before.end(), p + 16), 0);
  free(p);
}

// The inline free tests for null only after its known-chunk compare, which
// null and any pointer into the first megabyte fail: null frees nothing once
// a chunk is known, and a pointer near it is still reported.
TEST_F(ThreadCache, NullAndLowPointersMissTheKnownChunk) {
  const size_t bin = class_of(64);
  void* p = opaque(malloc(64));
  free(p);  // the known chunk is now p's
  const std::vector<void*> before = cached(bin);
  free(opaque(static_cast<void*>(nullptr)));
  EXPECT_EQ(cached(bin), before);
  EXPECT_EQ(opaque(malloc(64)), p) << "a free of null changed the cache";
  free(p);
  EXPECT_EXIT((no_core_dump(), free(opaque(reinterpret_cast<void*>(0xfffff)))),
              testing::KilledBySignal(SIGABRT), "free\\(0xfffff\\): .*not allocated by runsel");
  EXPECT_EXIT((no_core_dump(), free(opaque(reinterpret_cast<void*>(0x10)))),
              testing::KilledBySignal(SIGABRT), "free\\(0x10\\): .*not allocated by runsel");
}

TEST_F(ThreadCache, AThreadsExitGivesItsCacheBack) {
  size_t inside = 0;
  std::thread worker([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 1000; ++i) blocks.push_back(opaque(malloc(16 + 16 * (i % 20))));
    for (void* p : blocks) free(p);
    inside = thread_cached();
  });
  worker.join();
  EXPECT_GT(inside, 0u);
  // Only this thread's cache is left (std::thread allocated through it), and,
  // in the fast profile, the freed large runs the arenas keep (thread_cached
  // counts those too; malloc_trim gives both back, not the worker's cache).
  if (std::string(runsel_build_profile()) == "fast") {
    malloc_trim(0);
  } else {
    runsel_thread_cache_flush();
  }
  EXPECT_EQ(thread_cached(), 0u);
  EXPECT_EQ(runsel_check(), 0);
}

// A program that frees a batch of blocks and calls malloc_trim expects their
// memory back: the calling thread's cache is given back first, so the runs
// it held empty and are purged with the other dirty pages.
TEST_F(ThreadCache, MallocTrimGivesTheCallersCacheBack) {
  // The largest small class: few programs' blocks share its runs, and two
  // runs' worth of regions fit in its cache (twice the regions of a run).
  constexpr size_t kSize = 3840;
  runsel_stats_t s;
  runsel_stats(&s);
  const size_t regions = s.bins[class_of(kSize)].regions_per_run * 2;
  std::vector<void*> blocks;
  for (size_t i = 0; i < regions; ++i) blocks.push_back(opaque(malloc(kSize)));
  for (void* p : blocks) free(p);
  ASSERT_FALSE(cached(class_of(kSize)).empty());
  const int trimmed = malloc_trim(0);
  // Read before anything else allocates (cached() does).
  const size_t left = thread_cached();
  EXPECT_EQ(trimmed, 1) << "committed memory should go down";
  EXPECT_EQ(left, 0u);
  EXPECT_EQ(runsel_check(), 0);
}

// Fill sizes as a program meets them, measured from the stacks: a malloc that
// finds its class's stack empty and leaves it holding n regions took a fill
// of n + 1. Fills of a region or two cost an arena lock each: a thread that
// only allocates (a producer) once ratcheted its fills down to 2.4 regions on
// average (the GC took a fill's unused rest for idle regions), and so did
// batches that overflow the cache while other classes idle.
struct FillSizes {
  size_t fills = 0;
  size_t regions = 0;
  double mean() const { return fills == 0 ? 0.0 : double(regions) / double(fills); }
};

// `count` mallocs of `size`, none freed until the end; the fills they took.
FillSizes producer_fills(size_t size, size_t count) {
  static void* blocks[40000];
  static void* slots[kMaxSlots];
  FillSizes fills;
  const size_t bin = class_of(size);
  for (size_t i = 0; i < count; ++i) {
    const size_t before = runsel_thread_cache_slots(bin, slots, kMaxSlots);
    blocks[i] = opaque(malloc(size));
    const size_t after = runsel_thread_cache_slots(bin, slots, kMaxSlots);
    if (before == 0 && i >= count / 2) {  // after the start: the steady state
      ++fills.fills;
      fills.regions += after + 1;
    }
  }
  for (size_t i = 0; i < count; ++i) free(blocks[i]);
  return fills;
}

TEST_F(ThreadCache, AThreadThatOnlyAllocatesKeepsItsFillsLarge) {
  FillSizes fills;
  std::thread([&] { fills = producer_fills(64, 40000); }).join();
  ASSERT_GT(fills.fills, 0u);
  EXPECT_GE(fills.mean(), 16.0) << fills.fills << " fills of " << fills.regions << " regions";
  RecordProperty("fill_mean", std::to_string(fills.mean()));
  EXPECT_EQ(runsel_check(), 0);
}

// bench_simple_loop's shape: batches of 25 to 1,600 blocks of one size, freed
// in allocation order, four sizes in turn.
TEST_F(ThreadCache, BatchesThatOverflowTheCacheKeepTheirFillsLarge) {
  FillSizes fills;      // the second half of the turns (the steady state)
  FillSizes all_fills;  // every turn: the bounds grow during the first
  std::thread([&] {
    static void* blocks[1600];
    static void* slots[kMaxSlots];
    constexpr size_t kSizes[] = {16, 32, 64, 128};
    constexpr size_t kBatches[] = {25, 100, 400, 1600};
    for (size_t turn = 0; turn < 256; ++turn) {
      const size_t size = kSizes[turn % 4];
      const size_t count = kBatches[(turn / 4) % 4];
      const size_t bin = class_of(size);
      for (size_t i = 0; i < count; ++i) {
        const size_t before = runsel_thread_cache_slots(bin, slots, kMaxSlots);
        blocks[i] = opaque(malloc(size));
        if (before == 0) {
          const size_t regions = runsel_thread_cache_slots(bin, slots, kMaxSlots) + 1;
          ++all_fills.fills;
          all_fills.regions += regions;
          if (turn >= 128) {
            ++fills.fills;
            fills.regions += regions;
          }
        }
      }
      for (size_t i = 0; i < count; ++i) free(blocks[i]);
    }
  }).join();
  ASSERT_GT(all_fills.fills, 0u);
  EXPECT_GE(all_fills.mean(), 16.0)
      << all_fills.fills << " fills of " << all_fills.regions << " regions";
  // Once the bounds grew, every batch may stay cached (no fill at all).
  if (fills.fills > 0) {
    EXPECT_GE(fills.mean(), 16.0) << fills.fills << " fills of " << fills.regions << " regions";
  }
  RecordProperty("fills", std::to_string(fills.fills));
  RecordProperty("fill_mean", std::to_string(fills.mean()));
  EXPECT_EQ(runsel_check(), 0);
}

// `count` (at most 2 * kMaxSlots) mallocs of `size` from the calling thread,
// then their frees.
void batch(size_t size, size_t count) {
  static void* blocks[2 * kMaxSlots];
  for (size_t i = 0; i < count; ++i) blocks[i] = opaque(malloc(size));
  for (size_t i = 0; i < count; ++i) free(blocks[i]);
}

// Cached regions of three classes, about 600 KiB once 128 B's bound grew.
void idle_ballast() {
  for (int round = 0; round < 4; ++round) batch(1024, 256);
  for (int round = 0; round < 4; ++round) batch(2048, 128);
  batch(3840, first_bound(class_of(3840)));
}

// A program that frees batches larger than a class's bound (bench_simple_loop:
// 1,600 blocks of 128 B against a bound of 64) once flushed half the stack 24
// times a batch; the bound grows instead, and the batch stays cached (but for
// what the GC may take of a fill's rest: at most 3/4 of 31 regions).
TEST_F(ThreadCache, BatchesLargerThanTheBoundStayCached) {
  const size_t bin = class_of(128);
  size_t bound = 0;
  size_t held = 0;
  std::thread([&] {
    for (int round = 0; round < 6; ++round) batch(128, 1600);
    bound = runsel_thread_cache_bound(bin);
    held = cached_count(bin);
  }).join();
  EXPECT_GE(bound, 1600u);
  EXPECT_GE(held, 1600u - 24);
  EXPECT_EQ(runsel_check(), 0);
}

// Grown bounds cost memory: with every class's batches overflowing, the
// bounds grow by kGrowBudget bytes at most; a class left idle while another
// is used shrinks back to its first bound (the GC halves it at each visit
// that finds it idle), and one in use keeps its grown bound.
TEST_F(ThreadCache, GrownBoundsStayWithinTheBudgetAndShrinkWhenIdle) {
  runsel_stats_t s;
  runsel_stats(&s);
  size_t grown_bytes = 0;
  size_t busy = 0;
  size_t idle = 0;
  const size_t b128 = class_of(128);
  const size_t b32 = class_of(32);
  std::thread([&] {
    for (int round = 0; round < 4; ++round) {
      for (size_t b = 0; b < s.bin_count; ++b) {
        batch(s.bins[b].size, std::min<size_t>(kMaxSlots, 512 * 1024 / s.bins[b].size));
        ASSERT_EQ(runsel_check(), 0) << "class " << b << ", round " << round;
      }
    }
    for (size_t b = 0; b < s.bin_count; ++b) {
      const size_t bound = runsel_thread_cache_bound(b);
      ASSERT_GE(bound, first_bound(b)) << "class " << b;
      grown_bytes += (bound - first_bound(b)) * s.bins[b].size;
    }
  }).join();
  size_t grown = 0;
  size_t held = 0;
  std::thread([&] {  // a cache of its own, every bound the first
    const size_t baseline = thread_cached();
    for (int round = 0; round < 4; ++round) batch(128, 1600);
    grown = runsel_thread_cache_bound(b128);
    // More idle regions than the GC lets a thread keep (what the grow
    // budget allows of 1,600 of 128 B, 256 of 1 KiB and 128 of 2 KiB, and a
    // first bound of 3,840 B).
    idle_ballast();
    held = thread_cached() - baseline;
    // Batches larger than any bound: flushes, and with them the GC's steps
    // (a thread whose work stays in its cache takes none).
    for (int round = 0; round < 50; ++round) batch(32, 3000);
    busy = runsel_thread_cache_bound(b32);
    idle = runsel_thread_cache_bound(b128);
  })
      .join();
  EXPECT_GT(grown_bytes, 0u);
  EXPECT_LE(grown_bytes, kGrowBudget);
  EXPECT_GE(grown, 1600u);
  ASSERT_GT(held, kIdleBytes);
  EXPECT_GE(busy, 1000u);
  EXPECT_LT(idle, grown) << "an idle class kept its grown bound";
  EXPECT_EQ(runsel_check(), 0);
}

// The GC gives idle regions back while the thread holds more than kIdleBytes,
// down to that: a class the program stopped using is given back then, as
// other classes move regions through the arena (the GC's steps come with
// fills and flushes).
TEST_F(ThreadCache, IdleRegionsAreGivenBackDownToTheFloor) {
  size_t before = 0;
  size_t after = 0;
  size_t events = 0;
  std::thread([&] {
    const size_t baseline = thread_cached();
    for (int round = 0; round < 4; ++round) batch(128, 1600);
    idle_ballast();
    before = thread_cached() - baseline;
    // Only another class is used, in batches larger than its largest bound:
    // the GC visits the idle ones again and again.
    while (thread_cached() - baseline > kIdleBytes && events < 2'000'000) {
      batch(32, 3000);
      events += 6000;
    }
    after = thread_cached() - baseline;
  }).join();
  ASSERT_GT(before, kIdleBytes);
  EXPECT_LE(after, kIdleBytes) << "after " << events << " cache events";
  EXPECT_LT(events, 200'000u);
  EXPECT_EQ(runsel_check(), 0);
}

// Under the floor, a thread keeps its idle regions for its next batch of
// them: bench_simple_loop's four classes took turns, and the GC gave three
// quarters of each back between its batches, each region flushed and filled
// again once a cycle (a fifth of its instructions).
TEST_F(ThreadCache, IdleRegionsUnderTheFloorStay) {
  size_t kept = 0;
  const size_t idle = class_of(256);
  std::thread([&] {
    batch(256, 100);
    for (int i = 0; i < 100'000; ++i) free(opaque(malloc(32)));
    kept = cached_count(idle);
  }).join();
  EXPECT_GE(kept, 100u);
  EXPECT_EQ(runsel_check(), 0);
}

// The model: per class, the stack the cache must hold, bottom first, where a
// null entry stands for a region a fill took in (not known in advance), and
// the live blocks with their sizes and fill bytes. After every step the
// library's stacks must equal the model's where the model knows the entry;
// what the cache gave up (a flush or the GC: always its oldest entries) is
// dropped from the model's bottom, and what a fill added, which happens only
// on an empty stack, is added as unknown entries. The test's own bookkeeping
// lives in fixed arrays: it must not allocate while the model runs.
constexpr size_t kClasses = 8;
constexpr size_t kMaxLive = 600;

struct Model {
  void* stack[kClasses][kMaxSlots + 1];
  size_t depth[kClasses];
  void* real[kMaxSlots];
  struct Block {
    unsigned char* p;
    size_t size;
    unsigned char fill;
    size_t bin;
  } live[kMaxLive];
  size_t live_count;

  size_t real_of(size_t bin) { return runsel_thread_cache_slots(bin, real, kMaxSlots); }
  bool is_live(const void* p) const {
    for (size_t i = 0; i < live_count; ++i)
      if (live[i].p == p) return true;
    return false;
  }
  // Drops the oldest entries until `bin` holds `n`.
  void shrink_to(size_t bin, size_t n) {
    const size_t drop = depth[bin] - n;
    std::memmove(stack[bin], stack[bin] + drop, n * sizeof(void*));
    depth[bin] = n;
  }
};

TEST_F(ThreadCache, DifferentialAgainstAModel) {
  static Model m;
  runsel_stats_t s;
  runsel_stats(&s);
  size_t sizes[kClasses];
  for (size_t b = 0; b < kClasses; ++b) sizes[b] = s.bins[b].size;
  for (uint64_t seed : runsel_test::test_seeds(3)) {
    SCOPED_TRACE(runsel_test::replay_hint(seed));
    runsel_test::Random random(seed);
    runsel_thread_cache_flush();
    std::memset(&m, 0, sizeof m);
    for (int step = 0; step < 40000; ++step) {
      const size_t bin = random.below(kClasses);
      if (m.live_count < kMaxLive && (m.live_count == 0 || random.below(100) < 52)) {
        const size_t size = sizes[bin] - random.below(16);
        auto* p = static_cast<unsigned char*>(opaque(malloc(size)));
        ASSERT_NE(p, nullptr);
        ASSERT_FALSE(m.is_live(p)) << "handed out twice at step " << step;
        if (m.depth[bin] > 0) {
          void* top = m.stack[bin][--m.depth[bin]];
          if (top != nullptr) {
            ASSERT_EQ(p, top) << "not the newest cached region, step " << step;
          }
        } else {
          m.depth[bin] = m.real_of(bin);  // the fill's other regions, unknown
          for (size_t i = 0; i < m.depth[bin]; ++i) m.stack[bin][i] = nullptr;
        }
        const auto fill = static_cast<unsigned char>(random.next());
        std::memset(p, fill, size);
        m.live[m.live_count++] = {p, size, fill, bin};
      } else {
        const size_t at = random.below(m.live_count);
        const Model::Block block = m.live[at];
        m.live[at] = m.live[--m.live_count];
        for (size_t i = 0; i < block.size; ++i)
          ASSERT_EQ(block.p[i], block.fill) << "contents lost at step " << step;
        free(block.p);
        const size_t n = m.real_of(block.bin);
        ASSERT_GT(n, 0u);
        ASSERT_EQ(m.real[n - 1], block.p) << "a free is cached on top, step " << step;
        // A full stack first flushed its older half.
        if (n <= m.depth[block.bin]) m.shrink_to(block.bin, n - 1);
        m.stack[block.bin][m.depth[block.bin]++] = block.p;
      }
      // What the GC gave up (the oldest entries); then every known entry.
      for (size_t b = 0; b < kClasses; ++b) {
        const size_t n = m.real_of(b);
        ASSERT_LE(n, m.depth[b]) << "class " << b << " grew without a fill, step " << step;
        m.shrink_to(b, n);
        for (size_t i = 0; i < n; ++i) {
          if (m.stack[b][i] != nullptr) {
            ASSERT_EQ(m.real[i], m.stack[b][i])
                << "class " << b << " slot " << i << ", step " << step;
          }
          ASSERT_FALSE(m.is_live(m.real[i])) << "a live block is cached, step " << step;
        }
      }
      if (step % 5000 == 0) {
        ASSERT_EQ(runsel_check(), 0) << "at step " << step;
      }
    }
    while (m.live_count > 0) free(m.live[--m.live_count].p);
    ASSERT_EQ(runsel_check(), 0);
    runsel_stats(&s);
    EXPECT_LE(s.thread_cached, s.small_allocated);
  }
}

}  // namespace
