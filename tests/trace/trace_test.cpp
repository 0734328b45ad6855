// Functional tests of the trace tools: the format's reader; the recorder on a
// real python3 (threads and fork included) and on every_call.cpp (each call,
// allocation before main, threads freeing each other's blocks); the replayer
// on this suite's container (RUNSEL_TEST_CONTAINER); and seeded mutations of a
// trace, each cleanly rejected (exit 2 with the reader's offset) or replayed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <cstdlib>
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

namespace {

namespace fs = std::filesystem;
using namespace runsel::trace;
using Bytes = std::vector<std::uint8_t>;

const char* const kPython = "/usr/bin/python3";
std::string container() {
  const char* name = std::getenv("RUNSEL_TEST_CONTAINER");
  return name ? name : "rb_first";
}

// The containers that pick alike with container(), itself included: they must
// place every allocation of a replay identically. meson sets the list from its
// container table.
std::vector<std::string> same_choices() {
  std::vector<std::string> names;
  const char* list = std::getenv("RUNSEL_SAME_CHOICES");
  std::string rest = list ? list : "";
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    names.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  return names;
}

fs::path replayer(const std::string& name) {
  return fs::path(RUNSEL_REPLAY_DIR) / ("runsel-replay-" + name);
}

// --- processes and files -----------------------------------------------------------

struct Child {
  int status = 0;
  pid_t pid = 0;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Bytes read_bytes(const fs::path& path) {
  std::string text = slurp(path);
  return Bytes(text.begin(), text.end());
}

void write_bytes(const fs::path& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// Runs argv with `env` added to the environment; captures stdout and stderr.
// A child still running after a minute gets SIGALRM, which shows as a signal.
Child run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
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
    alarm(60);
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
fs::path record_python(const std::vector<std::string>& args, const fs::path& dir,
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

Summary summarize(const Bytes& bytes, bool partial = false) {
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
std::string placements(const std::string& output) {
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

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/runsel-trace-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// --- the format -------------------------------------------------------------------

TEST(TraceFormat, RoundTripsEveryOp) {
  Bytes bytes(4096);
  std::uint8_t* end = put_header(bytes.data(), 0, 1234);
  PointerCoder coder;
  std::vector<Record> written;
  for (std::uint8_t op = 1; op <= kLastOp; ++op) {
    Record r;
    r.op = static_cast<Op>(op);
    r.thread = op * 7u;  // both the nibble and the escaped form
    if (has_size(r.op)) r.size = 1ull << (op * 3);
    if (has_count(r.op)) r.count = op;
    if (has_alignment(r.op)) r.alignment = 64;
    if (has_input(r.op)) r.input = 0x7f0000001000ull + op * 16;
    if (has_result(r.op)) r.result = op % 3 == 0 ? 0 : 0x7f0000002000ull - op * 32;
    if (r.op == Op::mark) {
      r.label = "tab 3 loaded";
      r.label_length = 12;
    }
    end = put_record(end, r, coder);
    written.push_back(r);
  }
  end = put_end(end, written.size());
  bytes.resize(static_cast<std::size_t>(end - bytes.data()));
  Reader reader(bytes.data(), bytes.size());
  Header header;
  ASSERT_TRUE(reader.read_header(header));
  EXPECT_EQ(header.pid, 1234u);
  for (const Record& expected : written) {
    Record r;
    ASSERT_TRUE(reader.next(r));
    EXPECT_EQ(r.op, expected.op);
    EXPECT_EQ(r.thread, expected.thread);
    EXPECT_EQ(r.size, expected.size);
    EXPECT_EQ(r.count, expected.count);
    EXPECT_EQ(r.alignment, expected.alignment);
    EXPECT_EQ(r.input, expected.input);
    EXPECT_EQ(r.result, expected.result);
    EXPECT_EQ(std::string(r.label ? r.label : "", r.label_length),
              std::string(expected.label ? expected.label : "", expected.label_length));
  }
  Record r;
  EXPECT_FALSE(reader.next(r));
  EXPECT_FALSE(reader.failed());
  EXPECT_TRUE(reader.complete());
}

TEST(TraceFormat, ReportsTheOffsetOfTheFirstProblem) {
  Bytes good(64);
  std::uint8_t* end = put_header(good.data(), 0, 1);
  PointerCoder coder;
  end = put_record(end, Record{Op::malloc, 0, 100, 0, 0, 0, 0x1000}, coder);
  end = put_record(end, Record{Op::free, 0, 0, 0, 0, 0x1000, 0}, coder);
  end = put_end(end, 2);
  good.resize(static_cast<std::size_t>(end - good.data()));  // header 7, records 4 + 2, end 9

  auto problem = [](Bytes bytes) { return summarize(bytes).problem; };
  Bytes magic = good, version = good, flags = good, op = good, cut = good, count = good;
  magic[1] = 'X';
  version[4] = kVersion + 1;
  flags[5] = 0x80;
  op[7] = kLastOp + 1;
  cut.resize(10);
  count[14] = 3;
  Bytes no_end(good.begin(), good.begin() + 13), extra = good;
  extra.push_back(0);
  EXPECT_EQ(problem(no_end).offset, 13u);
  EXPECT_STREQ(problem(no_end).what, "truncated trace (no end record)");
  EXPECT_EQ(problem(count).offset, 13u);
  EXPECT_EQ(problem(extra).offset, good.size());
  EXPECT_EQ(problem(magic).offset, 1u);
  EXPECT_STREQ(problem(version).what, "unsupported trace version");
  EXPECT_EQ(problem(version).offset, 4u);
  EXPECT_EQ(problem(flags).offset, 5u);
  EXPECT_STREQ(problem(op).what, "bad op");
  EXPECT_EQ(problem(op).offset, 7u);
  EXPECT_STREQ(problem(cut).what, "truncated record");
  EXPECT_EQ(problem(cut).offset, cut.size());
  EXPECT_EQ(problem(Bytes{}).offset, 0u);
  EXPECT_TRUE(summarize(good).valid);
  Bytes old_version = good;  // version 1: the same records, read as they were
  old_version[4] = 1;
  EXPECT_TRUE(summarize(old_version).valid);

  // A partial reader takes the complete records of a cut trace.
  for (std::size_t size : {7, 9, 11, 13, 17}) {
    Reader partial(good.data(), size, true);
    Header header;
    Record r;
    ASSERT_TRUE(partial.read_header(header));
    while (partial.next(r)) {
    }
    EXPECT_FALSE(partial.failed()) << size;
    EXPECT_EQ(partial.records(), size < 11 ? 0u : size < 13 ? 1u : 2u) << size;
  }
}

// Mark records: valid from version 2 on, labels checked byte by byte.
TEST(TraceFormat, RejectsBadMarks) {
  auto trace = [](std::uint8_t version, const char* label, std::size_t length) {
    Bytes bytes(600);
    std::uint8_t* end = put_header(bytes.data(), 0, 1);
    bytes[4] = version;
    PointerCoder coder;
    Record mark{.op = Op::mark, .label = label, .label_length = static_cast<std::uint32_t>(length)};
    end = put_record(end, mark, coder);
    end = put_end(end, 1);
    bytes.resize(static_cast<std::size_t>(end - bytes.data()));
    return summarize(bytes);
  };
  EXPECT_TRUE(trace(2, "tab 1", 5).valid);
  std::string long_label(kMaxLabel + 1, 'x');
  Summary v1 = trace(1, "tab 1", 5), empty = trace(2, "", 0), control = trace(2, "a\nb", 3),
          too_long = trace(2, long_label.c_str(), long_label.size());
  EXPECT_STREQ(v1.problem.what, "bad op");
  EXPECT_EQ(v1.problem.offset, 7u);
  EXPECT_STREQ(empty.problem.what, "bad mark label length");
  EXPECT_STREQ(control.problem.what, "bad byte in mark label");
  EXPECT_EQ(control.problem.offset, 7u);
  EXPECT_STREQ(too_long.problem.what, "bad mark label length");
  EXPECT_TRUE(trace(2, long_label.c_str(), kMaxLabel).valid);
}

// --- recording and replaying a real program -------------------------------------------

std::uint64_t field(const std::string& output, const std::string& prefix, const std::string& key) {
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

TEST_F(TraceTest, ReplaysPythonWithTheRecordedOperationCount) {
  fs::path script = fs::path(RUNSEL_SOURCE_DIR) / "tests/programs/alloc_heavy.py";
  Child python;
  fs::path trace = record_python({script.string()}, dir_, &python);
  EXPECT_NE(python.out.find("checksum"), std::string::npos);
  Summary summary = summarize(read_bytes(trace));
  ASSERT_TRUE(summary.valid) << summary.problem.what << " at " << summary.problem.offset;
  EXPECT_GT(summary.records, 100000u);

  fs::path first_json = dir_ / "first.json", second_json = dir_ / "second.json";
  Child replay = run({replayer(container()).string(), "--every", "500000", "--json",
                      first_json.string(), trace.string()},
                     {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  // A replay is deterministic (one thread, no address randomization): a second
  // one agrees to the byte, resident memory included.
  Child again = run({replayer(container()).string(), "--every", "500000", "--json",
                     second_json.string(), trace.string()},
                    {}, dir_);
  ASSERT_TRUE(WIFEXITED(again.status) && WEXITSTATUS(again.status) == 0) << again.err;
  EXPECT_EQ(replay.out, again.out);
  // Writing JSON changes no figure: the replayer's own buffers are not heap.
  Child plain = run({replayer(container()).string(), "--every", "500000", trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0) << plain.err;
  EXPECT_EQ(replay.out, plain.out);
  std::string figures = slurp(first_json);
  EXPECT_EQ(figures, slurp(second_json));
  EXPECT_NE(figures.find("\"name\": \"peak\""), std::string::npos) << figures.substr(0, 2000);
  EXPECT_EQ(field(replay.out, "replay", "ops"), summary.records);
  EXPECT_EQ(field(replay.out, "end", "ops"), summary.records);
  EXPECT_EQ(field(replay.out, "replay", "unknown_pointers"), 0u);
  EXPECT_EQ(field(replay.out, "replay", "failed"), 0u);
  EXPECT_NE(replay.out.find("bins:"), std::string::npos);

  for (const std::string& name : same_choices()) {
    if (container() == name || access(replayer(name).c_str(), X_OK) != 0) continue;
    Child other = run({replayer(name).string(), "--every", "500000", trace.string()}, {}, dir_);
    ASSERT_TRUE(WIFEXITED(other.status) && WEXITSTATUS(other.status) == 0) << other.err;
    EXPECT_EQ(placements(replay.out), placements(other.out)) << container() << " vs " << name;
  }
}

TEST_F(TraceTest, RecordsThreadsAndAForkedChildInItsOwnFile) {
  const char* program =
      "import os, threading\n"
      "def work(n):\n"
      "    keep = [bytearray(64 + i % 900) for i in range(5000 + n)]\n"
      "threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]\n"
      "for t in threads: t.start()\n"
      "for t in threads: t.join()\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    keep = [str(i) * 3 for i in range(20000)]\n"
      "    os._exit(0)\n"
      "os.waitpid(pid, 0)\n";
  Child python;
  fs::path trace = record_python({"-c", program}, dir_, &python);
  Summary parent = summarize(read_bytes(trace));
  ASSERT_TRUE(parent.valid) << parent.problem.what << " at " << parent.problem.offset;
  EXPECT_EQ(parent.header.flags, 0);
  EXPECT_EQ(parent.header.pid, static_cast<std::uint64_t>(python.pid));
  EXPECT_GE(parent.per_thread.size(), 5u) << "main thread and 4 workers";

  std::vector<fs::path> children;
  for (const auto& entry : fs::directory_iterator(dir_))
    if (entry.path().filename().string().rfind("trace.", 0) == 0 && entry.path() != trace)
      children.push_back(entry.path());
  ASSERT_EQ(children.size(), 1u);
  Summary child = summarize(read_bytes(children[0]));
  ASSERT_TRUE(child.valid) << child.problem.what << " at " << child.problem.offset;
  EXPECT_EQ(child.header.flags, kFlagForkedChild);
  EXPECT_GT(child.records, 20000u);

  for (const fs::path& path : {trace, children[0]}) {
    Child replay = run({replayer(container()).string(), path.string()}, {}, dir_);
    ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
    EXPECT_EQ(field(replay.out, "replay", "failed"), 0u);
  }
}

TEST_F(TraceTest, RecordsEveryCallIncludingBeforeMain) {
  Child program = run({RUNSEL_EVERY_CALL},
                      {std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
                       "RUNSEL_TRACE=" + (dir_ / "trace.%p").string()},
                      dir_);
  ASSERT_TRUE(WIFEXITED(program.status) && WEXITSTATUS(program.status) == 0) << program.err;
  Bytes bytes = read_bytes(dir_ / ("trace." + std::to_string(program.pid)));
  Reader reader(bytes.data(), bytes.size());
  Header header;
  ASSERT_TRUE(reader.read_header(header));
  std::vector<Record> records;
  for (Record r; reader.next(r);) records.push_back(r);
  ASSERT_FALSE(reader.failed()) << reader.problem().what << " at " << reader.problem().offset;

  auto first = [&](Op op, std::uint64_t size) {
    for (std::size_t i = 0; i < records.size(); ++i)
      if (records[i].op == op && records[i].size == size) return i;
    return records.size();
  };
  std::size_t before_main = first(Op::malloc, 12345), start = first(Op::malloc, 1001);
  ASSERT_LT(before_main, records.size()) << "the static constructor's malloc";
  ASSERT_LT(start, records.size());
  std::uint32_t worker = records[start].thread;  // not the main thread
  EXPECT_NE(worker, records[before_main].thread);

  // The worker's calls from free(sink) on, in order: op, count, size, alignment.
  struct Call {
    Op op;
    std::uint64_t count, size, alignment;
  };
  const Call expected[] = {{Op::free, 0, 0, 0},       {Op::malloc, 0, 1001, 0},
                           {Op::realloc, 0, 1002, 0}, {Op::reallocarray, 3, 1003, 0},
                           {Op::free, 0, 0, 0},       {Op::calloc, 4, 1004, 0},
                           {Op::free, 0, 0, 0},       {Op::posix_memalign, 0, 1005, 64},
                           {Op::free, 0, 0, 0},       {Op::aligned_alloc, 0, 1024, 128},
                           {Op::free, 0, 0, 0},       {Op::memalign, 0, 1007, 256},
                           {Op::free, 0, 0, 0},       {Op::valloc, 0, 1008, 0},
                           {Op::free, 0, 0, 0},       {Op::pvalloc, 0, 1009, 0},
                           {Op::free, 0, 0, 0}};
  std::vector<Record> calls;
  for (std::size_t i = before_main + 1; i < records.size(); ++i) {
    bool free_of_sink =
        records[i].op == Op::free && records[i].input == records[before_main].result;
    if (records[i].thread == worker && (free_of_sink || !calls.empty()))
      calls.push_back(records[i]);
  }
  ASSERT_GE(calls.size(), std::size(expected)) << "free(sink) and what follows it";
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    SCOPED_TRACE("call " + std::to_string(i) + " " + op_name(calls[i].op));
    EXPECT_EQ(calls[i].op, expected[i].op);
    EXPECT_EQ(calls[i].count, expected[i].count);
    EXPECT_EQ(calls[i].size, expected[i].size);
    EXPECT_EQ(calls[i].alignment, expected[i].alignment);
    if (i > 0 && has_input(calls[i].op)) {
      EXPECT_EQ(calls[i].input, calls[i - 1].result);
    }
    if (has_result(calls[i].op)) {
      EXPECT_NE(calls[i].result, 0u);
    }
  }

  Child replay = run(
      {replayer(container()).string(), (dir_ / ("trace." + std::to_string(program.pid))).string()},
      {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  EXPECT_EQ(field(replay.out, "replay", "ops"), records.size());
  EXPECT_EQ(field(replay.out, "replay", "unknown_pointers"), 0u);
}

TEST_F(TraceTest, ThreadsFreeingEachOthersBlocksReplayWithoutUnknownPointers) {
  // One glibc arena and no per-thread cache: a block one thread frees is the
  // next another thread gets.
  Child program = run({RUNSEL_EVERY_CALL, "--swap"},
                      {"GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1",
                       std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
                       "RUNSEL_TRACE=" + (dir_ / "trace.%p").string()},
                      dir_);
  ASSERT_TRUE(WIFEXITED(program.status) && WEXITSTATUS(program.status) == 0) << program.err;
  fs::path trace = dir_ / ("trace." + std::to_string(program.pid));
  Summary summary = summarize(read_bytes(trace));
  ASSERT_TRUE(summary.valid) << summary.problem.what << " at " << summary.problem.offset;
  EXPECT_GE(summary.per_thread.size(), 5u);
  EXPECT_GT(summary.records, 100000u);

  // Had a reuse been recorded before its free, the replay would meet an
  // address still live (reused_live) and later free it twice (unknown).
  Child replay = run({replayer(container()).string(), trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  EXPECT_EQ(field(replay.out, "replay", "ops"), summary.records);
  EXPECT_EQ(field(replay.out, "replay", "unknown_pointers"), 0u);
  EXPECT_EQ(field(replay.out, "replay", "reused_live"), 0u);
}

// A driver publishes marks in the RUNSEL_TRACE_MARKS file between the program's
// calls: each becomes a mark record where the next call noticed it, labels
// published before the process started are not in its trace, and the replayer
// prints figures at each mark under its label.
TEST_F(TraceTest, RecordsMarksWherePublishedAndReplaysThem) {
  fs::path marks = dir_ / "marks";
  {
    Bytes file(65536, 0);
    const char before[] = "before start";
    std::memcpy(file.data() + 64, before, sizeof before);
    file[0] = 1;  // one label published before the program runs
    write_bytes(marks, file);
  }
  Child program = run({RUNSEL_PUBLISH_MARKS, marks.string()},
                      {std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
                       "RUNSEL_TRACE=" + (dir_ / "trace.%p").string(),
                       "RUNSEL_TRACE_MARKS=" + marks.string()},
                      dir_);
  ASSERT_TRUE(WIFEXITED(program.status) && WEXITSTATUS(program.status) == 0) << program.err;
  fs::path trace = dir_ / ("trace." + std::to_string(program.pid));
  Bytes bytes = read_bytes(trace);
  Reader reader(bytes.data(), bytes.size());
  Header header;
  ASSERT_TRUE(reader.read_header(header));
  EXPECT_EQ(header.version, kVersion);
  std::vector<Record> records;
  for (Record r; reader.next(r);) records.push_back(r);
  ASSERT_FALSE(reader.failed()) << reader.problem().what << " at " << reader.problem().offset;

  // What the program did, from malloc(3001) on: the marks in between, by label.
  auto label = [](const Record& r) { return std::string(r.label, r.label_length); };
  std::vector<std::string> seen;
  std::size_t first = records.size();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (r.op == Op::malloc && r.size == 3001) first = i;
    if (r.op == Op::mark) seen.push_back(label(r));
  }
  ASSERT_LT(first + 5, records.size());
  const std::vector<std::string> labels = {"first", "second", "third", "from a thread", "last"};
  EXPECT_EQ(seen, labels) << "'before start' was published before the program: not its mark";
  EXPECT_EQ(records[first + 1].op, Op::mark);
  EXPECT_EQ(label(records[first + 1]), "first");
  EXPECT_TRUE(records[first + 2].op == Op::malloc && records[first + 2].size == 3002);
  EXPECT_EQ(label(records[first + 3]), "second");
  EXPECT_EQ(label(records[first + 4]), "third");
  EXPECT_TRUE(records[first + 5].op == Op::free && records[first + 5].input == records[first].result);
  std::size_t thread_mark = first, thread_malloc = first, last_mark = first, last_free = first;
  for (std::size_t i = first; i < records.size(); ++i) {
    if (records[i].op == Op::mark && label(records[i]) == "from a thread") thread_mark = i;
    if (records[i].op == Op::malloc && records[i].size == 3003) thread_malloc = i;
    if (records[i].op == Op::mark && label(records[i]) == "last") last_mark = i;
    if (records[i].op == Op::free && records[i].input == records[first + 2].result) last_free = i;
  }
  EXPECT_LT(first + 5, thread_mark);
  EXPECT_LT(thread_mark, thread_malloc);
  EXPECT_LT(last_free, last_mark);

  Child replay = run({replayer(container()).string(), trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  EXPECT_EQ(field(replay.out, "replay", "ops"), records.size());
  for (const std::string& name : labels) {
    std::size_t at = replay.out.find("mark " + name + "\n");
    ASSERT_NE(at, std::string::npos) << name << " in:\n" << replay.out;
    std::string after = replay.out.substr(at);
    EXPECT_NE(after.find("\nstats ops="), std::string::npos) << name;
  }
}

// A figure of the JSON checkpoint named `name`: "key": N after its "name".
std::uint64_t json_figure(const std::string& json, const std::string& name, const std::string& key) {
  std::size_t at = json.find("{\"name\": \"" + name + "\"");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no checkpoint " << name << " in " << json.substr(0, 2000);
    return 0;
  }
  at = json.find("\"" + key + "\": ", at);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << key << " after checkpoint " << name;
    return 0;
  }
  return std::stoull(json.substr(at + key.size() + 4));
}

// Blocks the program wrote are resident in the replay too: 48 blocks of 200 KiB,
// never touched by the allocator, count in full. Every checkpoint keeps the stats
// identity, and each size class's unused bytes add up to bin_unused.
TEST_F(TraceTest, ReplaysWriteTheirBlocksAndReportExactFigures) {
  Bytes bytes(1 << 20);
  std::uint8_t* end = put_header(bytes.data(), 0, 42);
  PointerCoder coder;
  std::uint64_t records = 0;
  auto add = [&](Record r) {
    end = put_record(end, r, coder);
    ++records;
  };
  auto mark = [&](const char* label) {
    add(Record{.op = Op::mark, .label = label,
               .label_length = static_cast<std::uint32_t>(std::strlen(label))});
  };
  const std::uint64_t kLarge = 200 << 10, kBase = 0x7f0000000000ull;
  for (std::uint64_t i = 0; i < 48; ++i)
    add(Record{.op = Op::malloc, .size = kLarge, .result = kBase + i * (1 << 20)});
  mark("large");
  for (std::uint64_t i = 0; i < 20000; ++i)
    add(Record{.op = i % 2 ? Op::malloc : Op::calloc, .size = 24 + i % 200, .count = i % 2 ? 0u : 1u,
               .result = kBase + (1ull << 32) + i * 256});
  mark("small");
  for (std::uint64_t i = 0; i < 20000; i += 2) add(Record{.op = Op::free, .input = kBase + (1ull << 32) + i * 256});
  mark("half of the small freed");
  end = put_end(end, records);
  bytes.resize(static_cast<std::size_t>(end - bytes.data()));
  fs::path trace = dir_ / "synthetic", json = dir_ / "figures.json";
  write_bytes(trace, bytes);

  Child replay = run({replayer(container()).string(), "--json", json.string(), trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  std::string figures = slurp(json);
  EXPECT_NE(figures.find("\"writes_blocks\": true"), std::string::npos);
  EXPECT_GE(json_figure(figures, "large", "resident"), 48 * kLarge) << "blocks not written";
  EXPECT_EQ(json_figure(figures, "large", "live_requested"), 48 * kLarge);
  EXPECT_EQ(json_figure(figures, "peak", "ops"), 48u + 1 + 20000);
  for (const char* name : {"large", "small", "half of the small freed", "peak", "end"}) {
    SCOPED_TRACE(name);
    std::uint64_t committed = json_figure(figures, name, "committed");
    EXPECT_EQ(committed, json_figure(figures, name, "allocated") + json_figure(figures, name, "waste") +
                             json_figure(figures, name, "dirty") +
                             json_figure(figures, name, "bookkeeping") +
                             json_figure(figures, name, "bin_unused"));
    std::size_t at = figures.find("{\"name\": \"" + std::string(name) + "\"");
    std::size_t bins = figures.find("\"bins\": [", at), bins_end = figures.find("]}", bins);
    std::uint64_t unused = 0;
    for (std::size_t i = figures.find("\"unused_bytes\": ", bins); i < bins_end;
         i = figures.find("\"unused_bytes\": ", i + 1))
      unused += std::stoull(figures.substr(i + 16));
    EXPECT_EQ(unused, json_figure(figures, name, "bin_unused"));
  }
  EXPECT_GT(json_figure(figures, "half of the small freed", "bin_unused"),
            json_figure(figures, "small", "bin_unused"));
}

// --- Mozilla logalloc logs ---------------------------------------------------------------

// The records point into `file` (a mark's label), so it must outlive them.
std::vector<Record> records_of(const std::vector<std::uint8_t>& file) {
  Reader reader(file.data(), file.size());
  Header header;
  std::vector<Record> records;
  EXPECT_TRUE(reader.read_header(header));
  for (Record r; reader.next(r);) records.push_back(r);
  EXPECT_FALSE(reader.failed()) << reader.problem().what << " at " << reader.problem().offset;
  return records;
}

TEST(Logalloc, ParsesEveryFunctionPerProcess) {
  const char* const lines[] = {
      "900 900 malloc(40)=0x7f0000001000",   "900 77 calloc(2,100)=0x7f0000002000",
      "901 5 malloc(10)=0x5500a0",           "900 900 realloc(0x7f0000001000,80)=0x7f0000003000",
      "900 900 posix_memalign(64,300)=0x0",  "900 900 jemalloc_stats()",
      "900 77 free(0x7f0000003000)",         "900 900 free(0x0)",
      "900 900 aligned_alloc(128,256)=0x7F0000005000", "900 900 memalign(32,33)=(nil)",
      "900  900 valloc(5000)=0x7f0000008000\r", "900 900 realloc(0x0,7)=0x7f0000009000"};
  LogallocParser parser;
  for (const char* line : lines) ASSERT_TRUE(parser.line(line, std::strlen(line))) << parser.error();
  ASSERT_EQ(parser.processes().size(), 2u);
  const ProcessTrace& main = parser.processes().at(900);
  EXPECT_EQ(parser.largest(), &main);
  EXPECT_EQ(main.null_frees, 1u);
  EXPECT_EQ(main.marks, 1u);
  const std::vector<std::uint8_t> file = main.file();  // the labels point into it
  std::vector<Record> got = records_of(file);
  struct Expected {
    Op op;
    std::uint32_t thread;
    std::uint64_t count, size, alignment, input, result;
  };
  const Expected expected[] = {
      {Op::malloc, 0, 0, 40, 0, 0, 0x7f0000001000},
      {Op::calloc, 1, 2, 100, 0, 0, 0x7f0000002000},
      {Op::realloc, 0, 0, 80, 0, 0x7f0000001000, 0x7f0000003000},
      {Op::posix_memalign, 0, 0, 300, 64, 0, 0},
      {Op::mark, 0, 0, 0, 0, 0, 0},
      {Op::free, 1, 0, 0, 0, 0x7f0000003000, 0},
      {Op::aligned_alloc, 0, 0, 256, 128, 0, 0x7f0000005000},
      {Op::memalign, 0, 0, 33, 32, 0, 0},
      {Op::valloc, 0, 0, 5000, 0, 0, 0x7f0000008000},
      {Op::realloc, 0, 0, 7, 0, 0, 0x7f0000009000}};
  ASSERT_EQ(got.size(), std::size(expected));
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].op, expected[i].op);
    EXPECT_EQ(got[i].thread, expected[i].thread);
    EXPECT_EQ(got[i].count, expected[i].count);
    EXPECT_EQ(got[i].size, expected[i].size);
    EXPECT_EQ(got[i].alignment, expected[i].alignment);
    EXPECT_EQ(got[i].input, expected[i].input);
    EXPECT_EQ(got[i].result, expected[i].result);
  }
  EXPECT_EQ(std::string(got[4].label, got[4].label_length), "jemalloc_stats #1 (line 6)");
  EXPECT_EQ(records_of(parser.processes().at(901).file()).size(), 1u);
}

TEST(Logalloc, RejectsAMalformedLineWithItsNumber) {
  const std::pair<const char*, const char*> bad[] = {
      {"1 2 malloc(3)", "expected '='"},
      {"1 2 free(0x10)=0x20", "unexpected text at the end"},
      {"1 2 mallocx(3)=0x1", "unknown function 'mallocx'"},
      {"x 2 malloc(3)=0x1", "expected a process id"},
      {"1 2 malloc(3)=1234", "expected a pointer"},
      {"1 2 calloc(3)=0x1", "expected ','"},
      {"1 2 malloc(99999999999999999999)=0x1", "number out of range"},
      {"1 2 malloc(3)=0x1 ", "unexpected text at the end"},
      {"1 2 realloc(16,3)=0x1", "expected a pointer"},
      {"1 2 jemalloc_stats(1)", "expected ')'"},
      {"1 2 malloc(3)=0x11112222333344445", "pointer out of range"},
      {"", "expected a process id"},
      {"1\t2 malloc(3)=0x1", "expected a space"}};
  for (const auto& [line, what] : bad) {
    LogallocParser parser;
    const char good[] = "1 2 malloc(3)=0x10";
    ASSERT_TRUE(parser.line(good, std::strlen(good)));
    ASSERT_TRUE(parser.line(good, std::strlen(good)));
    EXPECT_FALSE(parser.line(line, std::strlen(line))) << line;
    EXPECT_EQ(parser.error().rfind("line 3, column ", 0), 0u) << parser.error();
    EXPECT_NE(parser.error().find(what), std::string::npos) << parser.error();
    EXPECT_FALSE(parser.line(good, std::strlen(good))) << "stays failed";
  }
}

// Whatever bytes a bad line holds, the message quotes it as one line of printable
// ASCII; a first line without the shape of a call is no log at all.
TEST(Logalloc, QuotesABadLineAsPrintableText) {
  const char line[] = "1 2 free(0x1\xff\0\n\\)";
  LogallocParser parser;
  EXPECT_FALSE(parser.line(line, sizeof line - 1));
  EXPECT_FALSE(parser.not_a_log()) << "it reached the call";
  EXPECT_EQ(parser.error(),
            "line 1, column 13: expected ')': 1 2 free(0x1\\xff\\x00\\x0a\\x5c)");
  const char garbage[] = "\x89PNG\r\x1a";
  LogallocParser other;
  EXPECT_FALSE(other.line(garbage, sizeof garbage - 1));
  EXPECT_TRUE(other.not_a_log());
  EXPECT_EQ(other.error(), "line 1, column 1: expected a process id: \\x89PNG\\x0d\\x1a");
}

// Replay figures with the names of marks and the file name left out: what a trip
// through the text format must keep.
std::string figures_without_names(const std::string& json) {
  static const std::regex name("\\{\"name\": \"[^\"]*\", \"kind\": \"mark\"");
  static const std::regex file("\"file\": \"[^\"]*\"");
  return std::regex_replace(std::regex_replace(json, name, "{\"kind\": \"mark\""), file, "");
}

// A recorded program with marks, written as a logalloc log (gzip-compressed) and
// read back: the same replay figures at every checkpoint. Another process's lines
// in the log are left out unless asked for.
TEST_F(TraceTest, LogallocRoundTripGivesTheSameReplayFigures) {
  fs::path marks = dir_ / "marks";
  write_bytes(marks, Bytes(65536, 0));
  std::string program =
      "import mmap\n"
      "f = open('" + marks.string() + "', 'r+b')\n"
      "m = mmap.mmap(f.fileno(), 65536)\n"
      "at, count = 64, 0\n"
      "def mark(label):\n"
      "    global at, count\n"
      "    data = label.encode() + b'\\0'\n"
      "    m[at:at + len(data)] = data\n"
      "    at += len(data)\n"
      "    count += 1\n"
      "    m[0:8] = count.to_bytes(8, 'little')\n"
      "keep = {}\n"
      "for round in range(3):\n"
      "    for i in range(4000):\n"
      "        keep[(round, i)] = 'x' * (i % 500) + str(i)\n"
      "    mark('round %d built' % round)\n"
      "    for i in range(0, 4000, 3):\n"
      "        del keep[(round, i)]\n"
      "    mark('round %d thinned' % round)\n";
  Child python = run({kPython, "-c", program},
                     {"PYTHONMALLOC=malloc", std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
                      "RUNSEL_TRACE=" + (dir_ / "trace.%p").string(),
                      "RUNSEL_TRACE_MARKS=" + marks.string()},
                     dir_);
  ASSERT_TRUE(WIFEXITED(python.status) && WEXITSTATUS(python.status) == 0) << python.err;
  fs::path trace = dir_ / ("trace." + std::to_string(python.pid));
  Summary summary = summarize(read_bytes(trace));
  ASSERT_TRUE(summary.valid);

  fs::path log = dir_ / "log.gz", text = dir_ / "log.txt", back = dir_ / "back";
  Child out = run({RUNSEL_TRACE_CONVERT, "to-logalloc", trace.string(), log.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0) << out.err;
  ASSERT_EQ(std::system(("gzip -dc " + log.string() + " > " + text.string()).c_str()), 0);
  std::string lines = slurp(text);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), static_cast<long>(summary.records));
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '('), static_cast<long>(summary.records));
  std::size_t stats = 0;
  for (std::size_t at = lines.find(" jemalloc_stats()\n"); at != std::string::npos;
       at = lines.find(" jemalloc_stats()\n", at + 1))
    ++stats;
  EXPECT_EQ(stats, 6u) << "one jemalloc_stats() per mark";
  // A second, smaller process in the same log: not the default choice.
  std::ofstream(text, std::ios::app) << "4242 1 malloc(100)=0x1000\n4242 1 free(0x1000)\n";
  Child in = run({RUNSEL_TRACE_CONVERT, "from-logalloc", text.string(), back.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(in.status) && WEXITSTATUS(in.status) == 0) << in.err;
  EXPECT_NE(in.out.find("pid " + std::to_string(python.pid) + ": "), std::string::npos) << in.out;
  EXPECT_NE(in.out.find("pid 4242: 2 calls, 0 jemalloc_stats, 1 threads\n"), std::string::npos)
      << in.out;
  Child compressed = run({RUNSEL_TRACE_CONVERT, "from-logalloc", log.string(),
                          (dir_ / "back.gz.trace").string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(compressed.status) && WEXITSTATUS(compressed.status) == 0)
      << compressed.err;
  EXPECT_EQ(read_bytes(dir_ / "back.gz.trace"), read_bytes(back)) << "plain and gzip alike";
  Child other = run({RUNSEL_TRACE_CONVERT, "from-logalloc", "--pid", "4242", text.string(),
                     (dir_ / "other").string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(other.status) && WEXITSTATUS(other.status) == 0) << other.err;
  EXPECT_EQ(summarize(read_bytes(dir_ / "other")).records, 2u);
  Child missing = run({RUNSEL_TRACE_CONVERT, "from-logalloc", "--pid", "4243", text.string(),
                       (dir_ / "none").string()}, {}, dir_);
  EXPECT_TRUE(WIFEXITED(missing.status) && WEXITSTATUS(missing.status) == 2) << missing.err;

  fs::path original_json = dir_ / "original.json", back_json = dir_ / "back.json";
  for (const auto& [input, json] : {std::pair{trace, original_json}, std::pair{back, back_json}}) {
    Child replay = run({replayer(container()).string(), "--json", json.string(), input.string()},
                       {}, dir_);
    ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  }
  std::string original = slurp(original_json), converted = slurp(back_json);
  EXPECT_NE(original.find("\"name\": \"round 2 thinned\""), std::string::npos);
  EXPECT_NE(converted.find("\"name\": \"jemalloc_stats #6 (line "), std::string::npos);
  EXPECT_EQ(figures_without_names(original), figures_without_names(converted));
}

// --- bad input ------------------------------------------------------------------------

// A trace is only a claim: a few records can claim more live memory than the
// machine has, and the replay writes every live block. Such a trace is refused
// before any call (exit 2, one line naming the peak and the bound), and replays
// with --allow-large-live-set (here the pebibyte cannot be had: counted as failed).
TEST_F(TraceTest, ALiveSetBeyondMemoryIsRefusedUnlessAllowed) {
  LogallocParser parser;
  for (const char* line : {"7 1 malloc(16)=0x1000", "7 1 malloc(1125899906842624)=0x10000000",
                           "7 1 free(0x10000000)"})
    ASSERT_TRUE(parser.line(line, std::strlen(line))) << parser.error();
  fs::path trace = dir_ / "pebibyte";
  write_bytes(trace, parser.largest()->file());
  Child refused = run({replayer(container()).string(), trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(refused.status)) << refused.err;
  EXPECT_EQ(WEXITSTATUS(refused.status), 2) << refused.err;
  EXPECT_NE(refused.err.find("live blocks peak at 1125899906842640 bytes (record 2), more than "
                             "the "),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  EXPECT_EQ(refused.out, "");

  Child allowed =
      run({replayer(container()).string(), "--allow-large-live-set", trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(allowed.status) && WEXITSTATUS(allowed.status) == 0) << allowed.err;
  EXPECT_EQ(field(allowed.out, "replay", "failed"), 1u);
  EXPECT_EQ(field(allowed.out, "replay", "unknown_pointers"), 1u) << "the free of the block";
}

// One random kind of damage. Returns what it did, for the failure message.
std::string mutate(Bytes& bytes, std::mt19937_64& rng) {
  auto at = [&](std::size_t limit) {
    return static_cast<std::size_t>(rng() % (limit ? limit : 1));
  };
  switch (rng() % 5) {
    case 0: {
      std::size_t size = at(bytes.size());
      bytes.resize(size);
      return std::string("truncate to ").append(std::to_string(size));
    }
    case 1: {
      std::string done = "flip";
      for (int n = 1 + static_cast<int>(rng() % 8); n > 0; --n) {
        std::size_t i = at(bytes.size());
        bytes[i] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        done.append(" ").append(std::to_string(i));
      }
      return done;
    }
    case 2:
      bytes[4] = static_cast<std::uint8_t>(kVersion + 1 + rng() % 250);
      return "wrong version";
    case 3: {
      std::size_t i = at(bytes.size());
      bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(i), 0xFF);
      return std::string("insert 0xFF at ").append(std::to_string(i));
    }
    default: {
      std::size_t i = 7 + at(bytes.size() - 7);
      bytes[i] = static_cast<std::uint8_t>(rng() % 16 == 0 ? 0x80 : rng() % 256);
      return std::string("overwrite ").append(std::to_string(i));
    }
  }
}

TEST_F(TraceTest, MutatedTracesAreRejectedWithTheirOffsetOrReplayed) {
  const char* count_text = std::getenv("RUNSEL_TRACE_MUTATIONS");
  const std::uint64_t seed = runsel_test::test_seed();
  int mutations = count_text ? std::atoi(count_text) : 60;
  SCOPED_TRACE(runsel_test::replay_hint(seed));

  fs::path trace = record_python({"-c", "x = {str(i): [i] * (i % 40) for i in range(3000)}"}, dir_);
  Bytes original = read_bytes(trace);
  ASSERT_TRUE(summarize(original).valid);
  std::mt19937_64 rng(seed);
  int rejected = 0;
  for (int n = 0; n < mutations; ++n) {
    Bytes bytes = original;
    std::string what = mutate(bytes, rng);
    fs::path path = dir_ / "mutated";
    write_bytes(path, bytes);
    for (bool partial : {false, true}) {
      Summary expected = summarize(bytes, partial);
      std::vector<std::string> argv = {replayer(container()).string(), path.string()};
      if (partial) argv.insert(argv.begin() + 1, "--partial");
      Child replay = run(argv, {}, dir_);
      SCOPED_TRACE(what + (partial ? " (--partial)" : ""));
      ASSERT_TRUE(WIFEXITED(replay.status))
          << "killed by signal " << WTERMSIG(replay.status) << "\n"
          << replay.err;
      int code = WEXITSTATUS(replay.status);
      if (expected.valid && code == 2 &&
          replay.err.find("--allow-large-live-set") != std::string::npos) {
        // A damaged size can claim more live memory than the machine has: refused
        // before any call, with the trace's own peak.
        TraceSurvey survey;
        ASSERT_TRUE(survey_trace(bytes.data(), bytes.size(), partial, survey));
        EXPECT_NE(replay.err.find(" peak at " + std::to_string(survey.peak_live_bytes) + " bytes"),
                  std::string::npos)
            << replay.err;
        EXPECT_EQ(replay.out, "") << "a refused trace replays nothing";
        continue;
      }
      if (expected.valid) {
        EXPECT_EQ(code, 0) << replay.err;
        EXPECT_EQ(field(replay.out, "replay", "ops"), expected.records);
        continue;
      }
      ++rejected;
      EXPECT_EQ(code, 2);
      std::string offset = "byte offset " + std::to_string(expected.problem.offset) + ": ";
      EXPECT_NE(replay.err.find(offset + expected.problem.what), std::string::npos)
          << "expected '" << offset << expected.problem.what << "' in: " << replay.err;
      EXPECT_EQ(replay.out, "") << "a rejected trace replays nothing";
    }
  }
  std::printf("%d of %d replays rejected (seed %llu)\n", rejected, 2 * mutations,
              static_cast<unsigned long long>(seed));
  EXPECT_GT(rejected, 0);
}

}  // namespace
