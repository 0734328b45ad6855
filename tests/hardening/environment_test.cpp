// runsel's numeric environment variables (RUNSEL_DIRTY_MAX_PAGES, RUNSEL_ARENAS)
// are read by RUNSEL_CONF's strict parser: a bad value is reported in one line on
// stderr naming the variable, and ignored (the default stays), as a bad
// RUNSEL_CONF entry is; a good one is taken silently. Each case runs this
// program again (listing its tests, which allocates) with the variable set.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runsel.h"
#include "support/program_runner.h"

namespace {

using runsel_test::exited_zero;
using runsel_test::Outcome;

struct Variable {
  const char* name;
  const char* expected;  // what the message says a value must be
};

const Variable kVariables[] = {
    {"RUNSEL_DIRTY_MAX_PAGES",
     "a number of pages from 1 to 999999999999999999, as RUNSEL_CONF's dirty_max_pages:N"},
    {"RUNSEL_ARENAS", "a number of arenas from 1 to 999999999999999999; above 64 means 64"},
};

// This program with `name=value` (and no other runsel setting) in its environment.
Outcome run_with(const char* name, const std::string& value) {
  runsel_test::ScratchDir scratch;
  runsel_test::EnvChanges changes = {{"RUNSEL_CONF", std::nullopt},
                                     {"RUNSEL_STATS", std::nullopt},
                                     {"RUNSEL_DIRTY_MAX_PAGES", std::nullopt},
                                     {"RUNSEL_ARENAS", std::nullopt}};
  changes.push_back({name, value});
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  return runsel_test::run({self, "--gtest_list_tests"}, changes, "", scratch.path, 60);
}

TEST(Environment, AGarbageValueIsReportedInOneLineAndIgnored) {
  // Not a number, signed, trailing text, hexadecimal, spaces, zero (RUNSEL_CONF
  // rejects dirty_max_pages:0), and numbers too long for the parser (which would
  // wrap 64 bits: 2^64 arenas used to read as 1).
  const std::vector<std::string> bad = {"abc",
                                        "-1",
                                        "4x",
                                        "+4",
                                        "0x10",
                                        " 4",
                                        "4 ",
                                        "0",
                                        "99999999999999999999",
                                        "18446744073709551616",
                                        "1000000000000000000"};
  for (const Variable& variable : kVariables) {
    for (const std::string& value : bad) {
      SCOPED_TRACE(std::string(variable.name) + "=" + value);
      Outcome child = run_with(variable.name, value);
      EXPECT_TRUE(exited_zero(child.status)) << child.err;
      EXPECT_EQ(child.err, std::string("runsel: ") + variable.name + ": ignoring \"" + value +
                               "\" (" + variable.expected + ")\n");
    }
  }
}

TEST(Environment, AGoodValueIsTakenSilently) {
  for (const Variable& variable : kVariables) {
    for (const std::string value : {"1", "2", "64", "999999999999999999", ""}) {
      SCOPED_TRACE(std::string(variable.name) + "=" + value);
      Outcome child = run_with(variable.name, value);
      EXPECT_TRUE(exited_zero(child.status)) << child.err;
      EXPECT_EQ(child.err, "");
    }
  }
}

// RUNSEL_CONF's run_pages: one run size in pages per class (45 of them; a count
// where fewer than 2 regions fit, a wrong count, or a non-number is refused whole),
// each optionally with its regions (PxN: refused when N do not fit, or N < 2).
TEST(Environment, RunPagesTakesOneSizePerClassOrIsReported) {
  std::string firefox153;  // Firefox 153's layout: 16 KiB for most classes below 512 B
  for (int pages : {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,  4, 4, 4, 4,  4, 4,  4, 5,  4, 4, 4, 4,
                    4, 5, 4, 5, 4, 4, 4, 5, 8, 4, 16, 6, 8, 4, 32, 4, 12, 9, 16, 9, 8, 16})
    firefox153 += (firefox153.empty() ? "" : "/") + std::to_string(pages);
  static runsel_stats_t stats;
  runsel_stats(&stats);
  if (stats.bin_count != 45) GTEST_SKIP() << "a build with " << stats.bin_count << " classes";
  Outcome good = run_with("RUNSEL_CONF", "run_pages:" + firefox153);
  EXPECT_TRUE(exited_zero(good.status)) << good.err;
  EXPECT_EQ(good.err, "");
  const std::string but_last = firefox153.substr(0, firefox153.size() - 2);      // ends in "/"
  Outcome counted = run_with("RUNSEL_CONF", "run_pages:" + but_last + "16x17");  // 3,840 B
  EXPECT_TRUE(exited_zero(counted.status)) << counted.err;
  EXPECT_EQ(counted.err, "");
  for (const std::string& bad : {std::string("run_pages:4/4"), "run_pages:" + firefox153 + "/4",
                                 "run_pages:" + but_last + "x", "run_pages:" + but_last + "16x",
                                 "run_pages:" + but_last + "16x18",  // 69,120 B in 65,536
                                 "run_pages:" + but_last + "16x1",
                                 "run_pages:" + but_last + "1",  // 3,840 B: 1 region per page
                                 "run_pages:" + but_last + "0", "run_pages:" + but_last + "65",
                                 "run_pages:" + firefox153 + "/"}) {
    SCOPED_TRACE(bad);
    Outcome child = run_with("RUNSEL_CONF", bad);
    EXPECT_TRUE(exited_zero(child.status)) << child.err;
    EXPECT_NE(child.err.find("runsel: RUNSEL_CONF: ignoring \"" + bad + "\""), std::string::npos)
        << child.err;
  }
}

// RUNSEL_CONF's growth_dirty_share: any number of 1 to 18 digits, 0 for none.
TEST(Environment, GrowthDirtyShareTakesANumberOrIsReported) {
  for (const char* good : {"growth_dirty_share:0", "growth_dirty_share:16"}) {
    SCOPED_TRACE(good);
    Outcome child = run_with("RUNSEL_CONF", good);
    EXPECT_TRUE(exited_zero(child.status)) << child.err;
    EXPECT_EQ(child.err, "");
  }
  for (const std::string bad : {"growth_dirty_share:", "growth_dirty_share:x",
                                "growth_dirty_share:-1", "growth_dirty_share:16x"}) {
    SCOPED_TRACE(bad);
    Outcome child = run_with("RUNSEL_CONF", bad);
    EXPECT_TRUE(exited_zero(child.status)) << child.err;
    EXPECT_NE(child.err.find("runsel: RUNSEL_CONF: ignoring \"" + bad + "\""), std::string::npos)
        << child.err;
  }
}

}  // namespace
