// python3, lua5.4, sqlite3 under LD_PRELOAD=runsel: same output, and stats prove runsel served.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runsel.h"
#include "support/heap.h"
#include "support/program_runner.h"

namespace {

const std::string kPrograms = std::string(RUNSEL_SOURCE_DIR) + "/tests/programs/";

using runsel_test::EnvChanges;
using runsel_test::find_in_path;
using runsel_test::json_number;
using runsel_test::json_value;
using runsel_test::Outcome;
using runsel_test::parse_stats;
using runsel_test::read_file;
using runsel_test::run;
using runsel_test::ScratchDir;
using runsel_test::StatsLine;

struct Program {
  std::string executable;      // looked up in PATH
  std::string debian_package;  // named when the program is missing
  std::vector<std::string> arguments;
  std::string stdin_file;  // in tests/programs, or ""
  EnvChanges environment;
  const char* served_counter;  // "nmalloc", or "nfree" for programs that allocate with realloc
};

// Runs the program without and with runsel preloaded; outputs must match
// and the stats of the busiest process must show runsel served it.
void CompareUnderRunsel(const Program& program) {
  std::string path = find_in_path(program.executable);
  // A missing program fails rather than skips: a skipped test reads as a
  // pass, and tools/runsel installs every program these tests run.
  ASSERT_FALSE(path.empty()) << program.executable << " is not installed (Debian package "
                             << program.debian_package << "; tools/runsel installs it)";
  ScratchDir scratch_dir;
  const std::string& scratch = scratch_dir.path;
  ASSERT_FALSE(scratch.empty());
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), program.arguments.begin(), program.arguments.end());
  std::string stdin_path = program.stdin_file.empty() ? "" : kPrograms + program.stdin_file;

  EnvChanges plain = program.environment;
  plain.push_back({"LD_PRELOAD", std::nullopt});
  plain.push_back({"RUNSEL_STATS", std::nullopt});
  Outcome without = run(argv, plain, stdin_path, scratch);
  ASSERT_TRUE(WIFEXITED(without.status) && WEXITSTATUS(without.status) == 0)
      << program.executable << " failed without runsel (status " << without.status
      << "): " << without.err;
  ASSERT_FALSE(without.out.empty());

  std::string stats_path = scratch + "/stats.json";
  EnvChanges preloaded = program.environment;
  preloaded.push_back({"LD_PRELOAD", runsel_test::library_path()});
  preloaded.push_back({"RUNSEL_STATS", stats_path});
  Outcome with = run(argv, preloaded, stdin_path, scratch);
  EXPECT_TRUE(WIFEXITED(with.status) && WEXITSTATUS(with.status) == 0)
      << program.executable << " failed under runsel (status " << with.status << "): " << with.err;
  EXPECT_EQ(with.out, without.out) << "output differs under runsel; stderr: " << with.err;

  std::vector<StatsLine> lines = parse_stats(read_file(stats_path));
  ASSERT_FALSE(lines.empty()) << "no stats written to " << stats_path;
  const StatsLine* busiest = &lines[0];
  for (const StatsLine& line : lines) {
    EXPECT_EQ(json_value(line.scalars, "variant").value_or("(missing)"),
              runsel_test::expected_variant())
        << line.scalars;
    if (json_number(line.scalars, program.served_counter) >
        json_number(busiest->scalars, program.served_counter))
      busiest = &line;
  }
  const std::string& json = busiest->scalars;
  EXPECT_GT(json_number(json, program.served_counter), 10000u) << json;
  EXPECT_GT(json_number(json, "pid"), 0u) << json;
  for (const char* key :
       {"mapped", "committed", "allocated", "waste", "dirty", "bookkeeping", "bin_unused",
        "small_allocated", "large_allocated", "huge_allocated", "narenas", "chunks", "huge_count",
        "dirty_max", "nmalloc", "nfree", "purges"})
    EXPECT_TRUE(json_value(json, key).has_value()) << "missing \"" << key << "\": " << json;
  runsel_stats_t own;  // this test process runs on the same library
  runsel_stats(&own);
  EXPECT_EQ(busiest->bin_objects, own.bin_count) << json;
  EXPECT_EQ(json_number(json, "committed"),
            json_number(json, "allocated") + json_number(json, "waste") +
                json_number(json, "dirty") + json_number(json, "bookkeeping") +
                json_number(json, "bin_unused"))
      << "the identity holds at exit: " << json;
}

TEST(Programs, Python) {
  CompareUnderRunsel({"python3",
                      "python3",
                      {kPrograms + "alloc_heavy.py"},
                      "",
                      {{"PYTHONMALLOC", "malloc"}, {"PYTHONHASHSEED", "0"}},
                      "nmalloc"});
}

// Lua's allocator calls only realloc and free, so its frees count.
TEST(Programs, Lua) {
  CompareUnderRunsel({"lua5.4", "lua5.4", {kPrograms + "alloc_heavy.lua"}, "", {}, "nfree"});
}

TEST(Programs, Sqlite) {
  CompareUnderRunsel(
      {"sqlite3", "sqlite3", {"-batch", ":memory:"}, "sqlite_script.sql", {}, "nmalloc"});
}

// A preloaded runsel brings no runtime a C program did not have: cat's own
// memory map shows runsel's library and no C++ runtime, libgcc_s or libm.
TEST(Programs, PreloadedIntoACProgramLoadsOnlyLibc) {
  std::string cat = find_in_path("cat");
  ASSERT_FALSE(cat.empty()) << "cat is not installed (Debian package coreutils)";
  ScratchDir scratch_dir;
  ASSERT_FALSE(scratch_dir.path.empty());
  Outcome maps = run({cat, "/proc/self/maps"}, {{"LD_PRELOAD", runsel_test::library_path()}}, "",
                     scratch_dir.path);
  ASSERT_TRUE(runsel_test::exited_zero(maps.status)) << maps.err;
  const std::string library = std::filesystem::path(runsel_test::library_path()).filename();
  EXPECT_NE(maps.out.find(library), std::string::npos) << maps.out;
#if defined(RUNSEL_SANITIZED_BUILD)
  // A sanitizer's runtime, which this build links into the library, needs
  // libstdc++ itself; the main build checks the library alone.
  return;
#endif
  for (const char* runtime : {"libstdc++", "libgcc_s", "libm.so", "libm-"})
    EXPECT_EQ(maps.out.find(runtime), std::string::npos) << runtime << " is loaded:\n" << maps.out;
}

// RUNSEL_STATS: "%p" in the path becomes the pid; "stderr" prints there.
// (perl, which is essential on Debian and exits normally with stderr open;
// coreutils close stderr before exit and dash leaves with _exit.)
TEST(Programs, StatsDestinations) {
  std::string perl = find_in_path("perl");
  ASSERT_FALSE(perl.empty()) << "perl is not installed (Debian package perl-base)";
  ScratchDir scratch_dir;
  const std::string& scratch = scratch_dir.path;
  ASSERT_FALSE(scratch.empty());
  Outcome per_pid = run(
      {perl, "-e", "print qq(hello\\n)"},
      {{"LD_PRELOAD", runsel_test::library_path()}, {"RUNSEL_STATS", scratch + "/stats-%p.json"}},
      "", scratch);
  EXPECT_EQ(per_pid.out, "hello\n") << per_pid.err;
  std::vector<StatsLine> lines =
      parse_stats(read_file(scratch + "/stats-" + std::to_string(per_pid.pid) + ".json"));
  ASSERT_EQ(lines.size(), 1u) << "one line in stats-" << per_pid.pid << ".json";
  EXPECT_EQ(json_number(lines[0].scalars, "pid"), static_cast<unsigned long long>(per_pid.pid));
  EXPECT_EQ(json_value(lines[0].scalars, "variant").value_or(""), runsel_test::expected_variant());

  for (const char* destination : {"stderr", "1"}) {
    Outcome to_stderr = run(
        {perl, "-e", "print qq(hello\\n)"},
        {{"LD_PRELOAD", runsel_test::library_path()}, {"RUNSEL_STATS", destination}}, "", scratch);
    EXPECT_EQ(to_stderr.out, "hello\n");
    lines = parse_stats(to_stderr.err);
    ASSERT_EQ(lines.size(), 1u) << "RUNSEL_STATS=" << destination << ", stderr: " << to_stderr.err;
    EXPECT_EQ(json_number(lines[0].scalars, "pid"), static_cast<unsigned long long>(to_stderr.pid));
  }
}

}  // namespace
