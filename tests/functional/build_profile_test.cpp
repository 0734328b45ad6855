// The build profile (memory/README.md, "Profiles"): the library names the
// profile meson built it in (RUNSEL_EXPECTED_PROFILE, set per test), in
// runsel_build_profile() and in its RUNSEL_STATS line, and behaves as it says:
// a fast library caches a freed small region in the thread's cache and has 48
// size classes, a faithful one has no cache and 45 (a custom one, either).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/program_runner.h"

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
  if (expected_profile() == "fast")
    EXPECT_GT(cached, 0u) << "a fast library with no region in its cache";
  else if (expected_profile() == "faithful")
    EXPECT_EQ(cached, 0u) << "a faithful library with a thread cache";
}

// The fast profile has the 5, 6 and 7 KiB classes (48), the faithful one
// mozjemalloc's 45.
TEST(BuildProfile, SizeClassesOfTheProfile) {
  runsel_stats_t s;
  runsel_stats(&s);
  if (expected_profile() == "fast") EXPECT_EQ(s.bin_count, 48u);
  if (expected_profile() == "faithful") EXPECT_EQ(s.bin_count, 45u);
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
