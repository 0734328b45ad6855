// Running real programs for runsel's tests: PATH lookup, scratch directories,
// fork/exec with a changed environment, and reading the RUNSEL_STATS JSON lines.
#pragma once

#include <fcntl.h>
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

extern char** environ;

namespace runsel_test {

// Absolute path of an executable found through PATH, or "".
inline std::string find_in_path(const std::string& name) {
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
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/runsel-test-XXXXXX";
    if (mkdtemp(pattern.data())) path = pattern;
  }
  ~ScratchDir() {
    if (!path.empty()) std::filesystem::remove_all(path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Environment changes: a value sets the variable, nullopt removes it.
using EnvChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Where a child's standard streams go ("" = /dev/null for stdin).
struct Streams {
  std::string in, out, err;
};

// Starts argv with the environment changed and the streams redirected; the
// alarm survives exec, so a hung program is killed after alarm_seconds.
// Returns the child's pid, or -1.
inline pid_t spawn(const std::vector<std::string>& argv, const EnvChanges& changes,
                   const Streams& streams, unsigned alarm_seconds) {
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
  std::string in_path = streams.in.empty() ? "/dev/null" : streams.in;
  std::string out_path = streams.out.empty() ? "/dev/null" : streams.out;
  std::string err_path = streams.err.empty() ? "/dev/null" : streams.err;

  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    alarm(alarm_seconds);
    execve(argv_pointers[0], argv_pointers.data(), env_pointers.data());
    _exit(127);
  }
  return pid;
}

struct Outcome {
  pid_t pid = -1;
  int status = -1;
  std::string out, err;
};

inline bool exited_zero(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// Runs argv to completion, stdout and stderr captured through files in scratch.
inline Outcome run(const std::vector<std::string>& argv, const EnvChanges& changes,
                   const std::string& stdin_path, const std::string& scratch,
                   unsigned alarm_seconds = 120) {
  Streams streams{stdin_path, scratch + "/stdout", scratch + "/stderr"};
  Outcome outcome;
  outcome.pid = spawn(argv, changes, streams, alarm_seconds);
  if (outcome.pid < 0) return outcome;
  waitpid(outcome.pid, &outcome.status, 0);
  outcome.out = read_file(streams.out);
  outcome.err = read_file(streams.err);
  return outcome;
}

// Scalar lookups in one JSON line of runsel's stats (the "bins" array cut out).
inline std::optional<std::string> json_value(const std::string& json, const std::string& key) {
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
inline unsigned long long json_number(const std::string& json, const std::string& key) {
  auto value = json_value(json, key);
  return value ? strtoull(value->c_str(), nullptr, 10) : 0;
}

struct StatsLine {
  std::string scalars;  // the line without its bins array
  size_t bin_objects = 0;
};

inline std::vector<StatsLine> parse_stats(const std::string& text) {
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

// The identity every stats line must satisfy.
inline bool stats_identity_holds(const std::string& json) {
  return json_number(json, "committed") ==
         json_number(json, "allocated") + json_number(json, "waste") + json_number(json, "dirty") +
             json_number(json, "bookkeeping") + json_number(json, "bin_unused");
}

}  // namespace runsel_test
