// Shared by the trace tests (trace_format_test.cpp, trace_record_test.cpp,
// logalloc_test.cpp): child processes and files, recording python3, reading a
// trace back, and the replay output's figures.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "logalloc.h"
#include "replay_engine.h"
#include "support/seeds.h"
#include "trace_format.h"

namespace runsel_trace_test {

namespace fs = std::filesystem;
using namespace runsel::trace;
using Bytes = std::vector<std::uint8_t>;

inline const char* const kPython = "/usr/bin/python3";
inline std::string container() {
  const char* name = std::getenv("RUNSEL_TEST_CONTAINER");
  return name ? name : "rb_first";
}

// The containers that pick alike with container(), itself included: they must
// place every allocation of a replay identically. meson sets the list from its
// container table. Under RUNSEL_TEST_SCALE=quick, container() and the one after
// it in the list (cyclically): each container's test compares with one other,
// and the group's tests together still link every member to every other.
inline std::vector<std::string> same_choices() {
  std::vector<std::string> names;
  const char* list = std::getenv("RUNSEL_SAME_CHOICES");
  std::string rest = list ? list : "";
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    names.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  if (!runsel_test::quick_scale() || names.size() <= 2) return names;
  const auto mine = std::find(names.begin(), names.end(), container());
  if (mine == names.end()) return names;
  const auto next = std::next(mine) == names.end() ? names.begin() : std::next(mine);
  return {*mine, *next};
}

// An instrumented build (checked, or a sanitizer): meson sets
// RUNSEL_TRACE_REPLAY_ONCE=1 there.
inline bool instrumented_build() {
  const char* once = std::getenv("RUNSEL_TRACE_REPLAY_ONCE");
  return once && std::string(once) == "1";
}

// Whether a test replays its trace once: in an instrumented build and under
// RUNSEL_TEST_SCALE=quick, leaving the repeats that prove a replay
// deterministic to the main build's full run (tools/runsel test --all).
inline bool replay_once() { return instrumented_build() || runsel_test::quick_scale(); }

inline fs::path replayer(const std::string& name) {
  return fs::path(RUNSEL_REPLAY_DIR) / ("runsel-replay-" + name);
}

// --- processes and files -----------------------------------------------------------

struct Child {
  int status = 0;
  pid_t pid = 0;
  std::string out, err;
};

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline Bytes read_bytes(const fs::path& path) {
  std::string text = slurp(path);
  return Bytes(text.begin(), text.end());
}

inline void write_bytes(const fs::path& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// Runs argv with `env` added to the environment; captures stdout and stderr.
// A child still running after a minute (five in an instrumented build, whose
// invariant walkers run after every call: a checked replay of the python trace
// took 63 s on a loaded 2-core machine) gets SIGALRM, which shows as a signal.
inline Child run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 const fs::path& dir) {
  fs::path out = dir / "child.out", err = dir / "child.err";
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    for (const std::string& setting : env) putenv(const_cast<char*>(setting.c_str()));
    int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    alarm(instrumented_build() ? 300 : 60);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  waitpid(child.pid, &child.status, 0);
  child.out = slurp(out);
  child.err = slurp(err);
  return child;
}

// Records `python3 args...` into dir; returns the trace of the python process.
inline fs::path record_python(const std::vector<std::string>& args, const fs::path& dir,
                              Child* child = nullptr) {
  std::vector<std::string> argv = {kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  Child python = run(argv,
                     {"PYTHONMALLOC=malloc", std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
                      "RUNSEL_TRACE=" + (dir / "trace.%p").string()},
                     dir);
  EXPECT_TRUE(WIFEXITED(python.status) && WEXITSTATUS(python.status) == 0) << python.err;
  if (child) *child = python;
  return dir / ("trace." + std::to_string(python.pid));
}

struct Summary {
  bool valid = false;
  Problem problem;
  Header header;
  std::uint64_t records = 0;
  std::map<std::uint32_t, std::uint64_t> per_thread;
};

inline Summary summarize(const Bytes& bytes, bool partial = false) {
  Summary summary;
  Reader reader(bytes.data(), bytes.size(), partial);
  Record record;
  if (reader.read_header(summary.header))
    while (reader.next(record)) ++summary.per_thread[record.thread];
  summary.valid = !reader.failed();
  summary.problem = reader.problem();
  summary.records = reader.records();
  return summary;
}

// The replay output that depends only on where the container puts blocks:
// every line but the comment, resident and purged ones, without bookkeeping and
// committed (array_heap's side array is bookkeeping, by design).
inline std::string placements(const std::string& output) {
  std::istringstream lines(output);
  std::string line, kept;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("resident", 0) == 0 ||
        line.rfind("purged", 0) == 0)
      continue;
    std::istringstream words(line);
    std::string word;
    while (words >> word)
      if (word.rfind("bookkeeping=", 0) != 0 && word.rfind("committed=", 0) != 0)
        kept += word + " ";
    kept += "\n";
  }
  return kept;
}

// The unsigned number after `"key": ` in text[from, to), or -1 when it is not there.
inline long long json_number(const std::string& text, const std::string& key, std::size_t from,
                             std::size_t to) {
  std::size_t at = text.find("\"" + key + "\": ", from);
  if (at == std::string::npos || at >= to) return -1;
  return std::stoll(text.substr(at + key.size() + 4, 24));  // not a copy of the rest
}

// The headroom bound in a replayer's JSON (tools/trace/format.md, "Replay figures"),
// checked at every checkpoint: each bin's bound is the packing arithmetic on its own
// figures, (ceil(in use / per run) * per run - in use) * size, and its unused bytes are
// not below it; the checkpoint's bound is their sum and bin_unused is not below it; one
// arena. Returns the checkpoints checked.
inline int expect_within_headroom(const std::string& json, const std::string& what) {
  int checked = 0;
  const std::string opening = "{\"name\": ";
  for (std::size_t at = json.find(opening); at != std::string::npos; ++checked) {
    const std::size_t next = json.find(opening, at + 1);
    const std::size_t end = next == std::string::npos ? json.size() : next;
    const std::size_t bins = json.find("\"bins\": [", at);
    const std::string name = json.substr(at + opening.size(), 40);
    EXPECT_EQ(json_number(json, "arenas", at, bins), 1) << what << " " << name;
    long long bound = json_number(json, "headroom_bound", at, bins);
    long long unused = json_number(json, "bin_unused", at, bins), summed = 0;
    for (std::size_t bin = json.find("{\"size\": ", bins); bin < end;
         bin = json.find("{\"size\": ", bin + 1)) {
      const std::size_t close = json.find('}', bin);
      const long long size = json_number(json, "size", bin, close),
                      in_use = json_number(json, "regions_in_use", bin, close),
                      per_run = json_number(json, "regions_per_run", bin, close),
                      bin_unused = json_number(json, "unused_bytes", bin, close),
                      stated = json_number(json, "headroom_bound", bin, close);
      const long long packed = per_run > 0 ? (in_use + per_run - 1) / per_run * per_run : 0;
      const long long expected = per_run > 0 ? (packed - in_use) * size : 0;
      EXPECT_EQ(stated, expected) << what << " " << name << " size " << size;
      EXPECT_GE(bin_unused, expected) << what << " " << name << " size " << size;
      summed += expected;
    }
    EXPECT_EQ(bound, summed) << what << " " << name;
    EXPECT_GE(unused, bound) << what << " " << name;
    at = next;
  }
  return checked;
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/runsel-trace-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every trace the suite replays goes through here too: replayed on this
  // suite's container with figures every `every` records, where no checkpoint
  // may go below the headroom bound (expect_within_headroom), and on each
  // container that picks alike with it (same_choices(), those built), which
  // must place its blocks identically (placements() of each checkpoint: every
  // bin's runs, non-full runs, regions in use and unused bytes). A difference
  // is a container bug. `bound_checked`: the test checked the bound on its own
  // replay of the trace, so a container alone in its group need not replay it
  // again (the python trace's replay is seconds).
  void expect_same_choices(const fs::path& trace, const std::string& every = "2000",
                           bool bound_checked = false) {
    std::vector<std::string> others;
    for (const std::string& name : same_choices())
      if (name != container() && access(replayer(name).c_str(), X_OK) == 0) others.push_back(name);
    if (others.empty() && bound_checked) return;
    const fs::path figures = dir_ / "headroom.json";
    Child mine = run({replayer(container()).string(), "--every", every, "--json", figures.string(),
                      trace.string()},
                     {}, dir_);
    ASSERT_TRUE(WIFEXITED(mine.status) && WEXITSTATUS(mine.status) == 0) << mine.err;
    EXPECT_GT(expect_within_headroom(slurp(figures), trace.filename().string()), 0);
    for (const std::string& name : others) {
      Child other = run({replayer(name).string(), "--every", every, trace.string()}, {}, dir_);
      ASSERT_TRUE(WIFEXITED(other.status) && WEXITSTATUS(other.status) == 0) << other.err;
      EXPECT_EQ(placements(mine.out), placements(other.out))
          << trace.filename() << ": " << container() << " vs " << name;
    }
  }

  fs::path dir_;
};

// The figure `key` (" key=N") on the first line of a replay's output that
// starts with `prefix`.
inline std::uint64_t field(const std::string& output, const std::string& prefix,
                           const std::string& key) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::size_t at = line.find(" " + key + "=");
    if (at != std::string::npos) return std::stoull(line.substr(at + key.size() + 2));
  }
  ADD_FAILURE() << "no " << key << " on a '" << prefix << "' line in:\n" << output;
  return 0;
}

}  // namespace runsel_trace_test
