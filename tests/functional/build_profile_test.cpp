// The build profile (memory/README.md, "Profiles"): the library names the
// profile meson built it in (RUNSEL_EXPECTED_PROFILE, set per test), in
// runsel_build_profile() and in its RUNSEL_STATS line, and behaves as it says:
// a fast library caches a freed small region in the thread's cache and has 48
// size classes, a faithful one has no cache and 45 (a custom one, either). A
// fast library's arenas keep freed runs of 1 to 4 pages for the next large
// malloc (arena/large_run_cache.h): a double free, realloc or
// malloc_usable_size of one is still caught, in every profile alike.
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/program_runner.h"

// The double frees below are the point.
#pragma GCC diagnostic ignored "-Wuse-after-free"

namespace {

std::string expected_profile() {
  const char* value = getenv("RUNSEL_EXPECTED_PROFILE");
  if (value && *value) return value;
  ADD_FAILURE() << "RUNSEL_EXPECTED_PROFILE is not set (meson test sets it: fast or faithful)";
  return "(unset)";
}

TEST(BuildProfile, NamesTheProfileItWasBuiltIn) {
  EXPECT_TRUE(runsel_test::RunsExpectedVariant());
  EXPECT_EQ(std::string(runsel_build_profile()), expected_profile());
}

// A freed 64-byte region stays in the thread's cache exactly when the profile is fast.
TEST(BuildProfile, CachesExactlyWhenFast) {
  void* p = runsel_test::opaque(malloc(64));
  ASSERT_NE(p, nullptr);
  free(p);
  runsel_stats_t s;
  runsel_stats(&s);
  size_t bin = 0;
  while (bin < s.bin_count && s.bins[bin].size < 64) ++bin;
  ASSERT_LT(bin, s.bin_count);
  std::vector<void*> slots(256);
  const size_t cached = runsel_thread_cache_slots(bin, slots.data(), slots.size());
  if (expected_profile() == "fast") {
    EXPECT_GT(cached, 0u) << "a fast library with no region in its cache";
  } else if (expected_profile() == "faithful") {
    EXPECT_EQ(cached, 0u) << "a faithful library with a thread cache";
  }
}

// The fast profile has the 5, 6 and 7 KiB classes (48), the faithful one
// mozjemalloc's 45.
TEST(BuildProfile, SizeClassesOfTheProfile) {
  runsel_stats_t s;
  runsel_stats(&s);
  if (expected_profile() == "fast") {
    EXPECT_EQ(s.bin_count, 48u);
  } else if (expected_profile() == "faithful") {
    EXPECT_EQ(s.bin_count, 45u);
  }
}

void no_core_dump() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

// A freed large run of a page count the fast profile caches, and one it does not.
TEST(BuildProfile, FreedLargeRunsAreReusedOnlyWhenFast) {
  for (size_t size : {size_t{8192}, size_t{16384}, size_t{20480}}) {
    void* p = runsel_test::opaque(malloc(size));
    ASSERT_NE(p, nullptr);
    memset(p, 0xa5, size);
    runsel_stats_t before, after;
    runsel_stats(&before);
    free(p);
    runsel_stats(&after);
    // A cached run is freed as far as the program knows: thread_cached holds it.
    if (expected_profile() == "fast" && size <= 16384) {
      EXPECT_EQ(after.thread_cached - before.thread_cached, size);
    }
    void* q = runsel_test::opaque(calloc(1, size));  // reuses the run when it is cached
    ASSERT_NE(q, nullptr);
    if (expected_profile() == "fast" && size <= 16384) {
      EXPECT_EQ(q, p) << size;
    }
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(static_cast<unsigned char*>(q)[i], 0) << i;
    EXPECT_EQ(runsel_check(), 0);
    free(q);
  }
  malloc_trim(0);  // gives cached runs back with the dirty pages
  EXPECT_EQ(runsel_check(), 0);
}

// Only the fast profile's runs wait in a cache; elsewhere the pages are free at
// once and may hold anything by now (the bad-input tests cover those).
TEST(BuildProfile, DoubleFreeOfACachedLargeRunAborts) {
  if (expected_profile() != "fast") GTEST_SKIP() << "no cache of freed large runs";
  GTEST_FLAG_SET(death_test_style, "fast");
  void* p = runsel_test::opaque(malloc(12288));
  ASSERT_NE(p, nullptr);
  free(p);
  EXPECT_EQ(malloc_usable_size(p), 0u);
  EXPECT_EXIT((no_core_dump(), free(runsel_test::opaque(p))), testing::KilledBySignal(SIGABRT),
              "runsel: free\\(0x[0-9a-f]+\\): double free of a large allocation");
  EXPECT_EXIT((no_core_dump(), runsel_test::opaque(realloc(runsel_test::opaque(p), 20000))),
              testing::KilledBySignal(SIGABRT),
              "runsel: realloc\\(0x[0-9a-f]+\\): double free of a large allocation");
}

// The RUNSEL_STATS line of a program that preloads the library names it too.
TEST(BuildProfile, StatsLineNamesTheProfile) {
  const std::string perl = runsel_test::find_in_path("perl");
  ASSERT_FALSE(perl.empty()) << "perl is not installed (Debian package perl-base)";
  runsel_test::ScratchDir scratch;
  ASSERT_FALSE(scratch.path.empty());
  runsel_test::Outcome outcome = runsel_test::run(
      {perl, "-e", "print qq(hello\\n)"},
      {{"LD_PRELOAD", runsel_test::library_path()}, {"RUNSEL_STATS", "stderr"}}, "", scratch.path);
  EXPECT_EQ(outcome.out, "hello\n") << outcome.err;
  std::vector<runsel_test::StatsLine> lines = runsel_test::parse_stats(outcome.err);
  ASSERT_EQ(lines.size(), 1u) << outcome.err;
  EXPECT_EQ(runsel_test::json_value(lines[0].scalars, "build_profile").value_or("(missing)"),
            expected_profile())
      << lines[0].scalars;
}

}  // namespace
