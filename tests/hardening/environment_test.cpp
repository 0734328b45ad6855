// runsel's numeric environment variables (RUNSEL_DIRTY_MAX_PAGES, RUNSEL_ARENAS)
// are read by RUNSEL_CONF's strict parser: a bad value is reported in one line on
// stderr naming the variable, and ignored (the default stays), as a bad
// RUNSEL_CONF entry is; a good one is taken silently. Each case runs this
// program again (listing its tests, which allocates) with the variable set.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

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
  const std::vector<std::string> bad = {"abc",  "-1",  "4x",   "+4",
                                        "0x10", " 4",  "4 ",   "0",
                                        "99999999999999999999", "18446744073709551616",
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

}  // namespace
