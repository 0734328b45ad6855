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

extern char** environ;

namespace {

const std::string kPrograms = std::string(RUNSEL_SOURCE_DIR) + "/tests/programs/";

// Absolute path of an executable found through PATH, or "".
std::string find_in_path(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A private temporary directory, removed with everything in it.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* base = getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/runsel-programs-XXXXXX";
    if (mkdtemp(pattern.data())) path = pattern;
  }
  ~ScratchDir() {
    if (!path.empty()) std::filesystem::remove_all(path);
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Environment changes: a value sets the variable, nullopt removes it.
using EnvChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

struct Outcome {
  pid_t pid = -1;
  int status = -1;
  std::string out, err;
};

// Runs argv with stdin from stdin_path (or /dev/null), capturing stdout and
// stderr. The child's alarm survives exec, so a hung program is killed.
Outcome run(const std::vector<std::string>& argv, const EnvChanges& changes,
            const std::string& stdin_path, const std::string& scratch) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const auto& change : changes)
      replaced |= entry.compare(0, change.first.size() + 1, change.first + "=") == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : changes)
    if (value) env.push_back(name + "=" + *value);
  std::vector<char*> env_pointers, argv_pointers;
  for (std::string& e : env) env_pointers.push_back(e.data());
  env_pointers.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (std::string& a : args) argv_pointers.push_back(a.data());
  argv_pointers.push_back(nullptr);
  std::string out_path = scratch + "/stdout", err_path = scratch + "/stderr";
  std::string in_path = stdin_path.empty() ? "/dev/null" : stdin_path;

  Outcome outcome;
  fflush(nullptr);
  outcome.pid = fork();
  if (outcome.pid == 0) {
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    alarm(120);
    execve(argv_pointers[0], argv_pointers.data(), env_pointers.data());
    _exit(127);
  }
  if (outcome.pid < 0) return outcome;
  waitpid(outcome.pid, &outcome.status, 0);
  outcome.out = read_file(out_path);
  outcome.err = read_file(err_path);
  return outcome;
}

// Scalar lookups in one JSON line of runsel's stats (the "bins" array cut out).
std::optional<std::string> json_value(const std::string& json, const std::string& key) {
  std::string quoted = "\"" + key + "\"";
  size_t at = json.find(quoted);
  if (at == std::string::npos) return std::nullopt;
  at = json.find_first_not_of(" \t", at + quoted.size());
  if (at == std::string::npos || json[at] != ':') return std::nullopt;
  at = json.find_first_not_of(" \t", at + 1);
  if (at == std::string::npos) return std::nullopt;
  if (json[at] == '"') {
    size_t end = json.find('"', at + 1);
    return end == std::string::npos ? std::nullopt
                                    : std::optional(json.substr(at + 1, end - at - 1));
  }
  size_t end = json.find_first_of(",}", at);
  return json.substr(at, end - at);
}
unsigned long long json_number(const std::string& json, const std::string& key) {
  auto value = json_value(json, key);
  return value ? strtoull(value->c_str(), nullptr, 10) : 0;
}

struct StatsLine {
  std::string scalars;  // the line without its bins array
  size_t bin_objects = 0;
};

std::vector<StatsLine> parse_stats(const std::string& text) {
  std::vector<StatsLine> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find('{') == std::string::npos) continue;
    StatsLine parsed{line};
    size_t bins = line.find("\"bins\"");
    size_t open = bins == std::string::npos ? bins : line.find('[', bins);
    size_t close = open == std::string::npos ? open : line.find(']', open);
    if (close != std::string::npos) {
      for (size_t i = open; i < close; ++i) parsed.bin_objects += line[i] == '{';
      parsed.scalars = line.substr(0, bins) + line.substr(close + 1);
    }
    lines.push_back(parsed);
  }
  return lines;
}

struct Program {
  std::string executable;      // looked up in PATH
  std::string debian_package;  // a missing program is skipped, naming it, unless required
  bool required;
  std::vector<std::string> arguments;
  std::string stdin_file;  // in tests/programs, or ""
  EnvChanges environment;
  const char* served_counter;  // "nmalloc", or "nfree" for programs that allocate with realloc
};

// Runs the program without and with runsel preloaded; outputs must match
// and the stats of the busiest process must show runsel served it.
void CompareUnderRunsel(const Program& program) {
  std::string path = find_in_path(program.executable);
  if (path.empty()) {
    if (!program.required)
      GTEST_SKIP() << program.executable << " is not installed (Debian package "
                   << program.debian_package << ")";
    FAIL() << program.executable << " not found in PATH";
  }
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
  preloaded.push_back({"LD_PRELOAD", std::string(RUNSEL_LIBRARY_PATH)});
  preloaded.push_back({"RUNSEL_STATS", stats_path});
  Outcome with = run(argv, preloaded, stdin_path, scratch);
  EXPECT_TRUE(WIFEXITED(with.status) && WEXITSTATUS(with.status) == 0)
      << program.executable << " failed under runsel (status " << with.status << "): " << with.err;
  EXPECT_EQ(with.out, without.out) << "output differs under runsel; stderr: " << with.err;

  std::vector<StatsLine> lines = parse_stats(read_file(stats_path));
  ASSERT_FALSE(lines.empty()) << "no stats written to " << stats_path;
  const StatsLine* busiest = &lines[0];
  for (const StatsLine& line : lines) {
    EXPECT_EQ(json_value(line.scalars, "variant").value_or("(missing)"), RUNSEL_EXPECTED_VARIANT)
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
  EXPECT_EQ(busiest->bin_objects, size_t{RUNSEL_NUM_BINS}) << json;
  EXPECT_EQ(json_number(json, "committed"),
            json_number(json, "allocated") + json_number(json, "waste") +
                json_number(json, "dirty") + json_number(json, "bookkeeping") +
                json_number(json, "bin_unused"))
      << "the identity holds at exit: " << json;
}

TEST(Programs, Python) {
  CompareUnderRunsel({"python3",
                      "python3",
                      true,
                      {kPrograms + "alloc_heavy.py"},
                      "",
                      {{"PYTHONMALLOC", "malloc"}, {"PYTHONHASHSEED", "0"}},
                      "nmalloc"});
}

// Lua's allocator calls only realloc and free, so its frees count.
TEST(Programs, Lua) {
  CompareUnderRunsel({"lua5.4", "lua5.4", false, {kPrograms + "alloc_heavy.lua"}, "", {}, "nfree"});
}

TEST(Programs, Sqlite) {
  CompareUnderRunsel(
      {"sqlite3", "sqlite3", false, {"-batch", ":memory:"}, "sqlite_script.sql", {}, "nmalloc"});
}

// RUNSEL_STATS: "%p" in the path becomes the pid; "stderr" prints there.
// (perl, which is essential on Debian and exits normally with stderr open;
// coreutils close stderr before exit and dash leaves with _exit.)
TEST(Programs, StatsDestinations) {
  std::string perl = find_in_path("perl");
  if (perl.empty()) GTEST_SKIP() << "perl is not installed (Debian package perl-base)";
  ScratchDir scratch_dir;
  const std::string& scratch = scratch_dir.path;
  ASSERT_FALSE(scratch.empty());
  Outcome per_pid = run({perl, "-e", "print qq(hello\\n)"},
                        {{"LD_PRELOAD", std::string(RUNSEL_LIBRARY_PATH)},
                         {"RUNSEL_STATS", scratch + "/stats-%p.json"}},
                        "", scratch);
  EXPECT_EQ(per_pid.out, "hello\n") << per_pid.err;
  std::vector<StatsLine> lines =
      parse_stats(read_file(scratch + "/stats-" + std::to_string(per_pid.pid) + ".json"));
  ASSERT_EQ(lines.size(), 1u) << "one line in stats-" << per_pid.pid << ".json";
  EXPECT_EQ(json_number(lines[0].scalars, "pid"), static_cast<unsigned long long>(per_pid.pid));
  EXPECT_EQ(json_value(lines[0].scalars, "variant").value_or(""), RUNSEL_EXPECTED_VARIANT);

  for (const char* destination : {"stderr", "1"}) {
    Outcome to_stderr =
        run({perl, "-e", "print qq(hello\\n)"},
            {{"LD_PRELOAD", std::string(RUNSEL_LIBRARY_PATH)}, {"RUNSEL_STATS", destination}}, "",
            scratch);
    EXPECT_EQ(to_stderr.out, "hello\n");
    lines = parse_stats(to_stderr.err);
    ASSERT_EQ(lines.size(), 1u) << "RUNSEL_STATS=" << destination << ", stderr: " << to_stderr.err;
    EXPECT_EQ(json_number(lines[0].scalars, "pid"), static_cast<unsigned long long>(to_stderr.pid));
  }
}

}  // namespace
