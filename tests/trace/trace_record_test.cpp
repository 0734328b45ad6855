// The recorder on a real python3 (threads and fork included) and on
// every_call.cpp (each call, allocation before main, threads freeing each
// other's blocks, published marks), and the replayer on this suite's container
// (RUNSEL_TEST_CONTAINER): operation counts, placements alike across the
// containers that pick alike, and exact figures.
#include <gtest/gtest.h>

#include "trace_support.h"

namespace runsel_trace_test {
namespace {

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
  std::string figures = slurp(first_json);
  EXPECT_GT(expect_within_headroom(figures, "python"), 0);
  if (!replay_once()) {
    // A replay is deterministic (one thread, no address randomization): a
    // second one agrees to the byte, resident memory included.
    Child again = run({replayer(container()).string(), "--every", "500000", "--json",
                       second_json.string(), trace.string()},
                      {}, dir_);
    ASSERT_TRUE(WIFEXITED(again.status) && WEXITSTATUS(again.status) == 0) << again.err;
    EXPECT_EQ(replay.out, again.out);
    EXPECT_EQ(figures, slurp(second_json));
    // Writing JSON changes no figure: the replayer's own buffers are not heap.
    Child plain =
        run({replayer(container()).string(), "--every", "500000", trace.string()}, {}, dir_);
    ASSERT_TRUE(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0) << plain.err;
    EXPECT_EQ(replay.out, plain.out);
  }
  EXPECT_NE(figures.find("\"name\": \"peak\""), std::string::npos) << figures.substr(0, 2000);
  EXPECT_EQ(field(replay.out, "replay", "ops"), summary.records);
  EXPECT_EQ(field(replay.out, "end", "ops"), summary.records);
  EXPECT_EQ(field(replay.out, "replay", "unknown_pointers"), 0u);
  EXPECT_EQ(field(replay.out, "replay", "failed"), 0u);
  EXPECT_NE(replay.out.find("bins:"), std::string::npos);

  expect_same_choices(trace, "100000", true);
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
    const fs::path json = dir_ / "own.json";
    Child replay =
        run({replayer(container()).string(), "--json", json.string(), path.string()}, {}, dir_);
    ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
    EXPECT_EQ(field(replay.out, "replay", "failed"), 0u);
    EXPECT_GT(expect_within_headroom(slurp(json), path.filename().string()), 0);
    expect_same_choices(path, "2000", true);
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
  expect_same_choices(dir_ / ("trace." + std::to_string(program.pid)), "20");
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
  const fs::path json = dir_ / "own.json";
  Child replay =
      run({replayer(container()).string(), "--json", json.string(), trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  EXPECT_EQ(field(replay.out, "replay", "ops"), summary.records);
  EXPECT_EQ(field(replay.out, "replay", "unknown_pointers"), 0u);
  EXPECT_EQ(field(replay.out, "replay", "reused_live"), 0u);
  EXPECT_GT(expect_within_headroom(slurp(json), "threads"), 0);
  expect_same_choices(trace, "2000", true);
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
  Child program =
      run({RUNSEL_PUBLISH_MARKS, marks.string()},
          {std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
           "RUNSEL_TRACE=" + (dir_ / "trace.%p").string(), "RUNSEL_TRACE_MARKS=" + marks.string()},
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
  EXPECT_TRUE(records[first + 5].op == Op::free &&
              records[first + 5].input == records[first].result);
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
  expect_same_choices(trace, "1");
}

// A figure of the JSON checkpoint named `name`: "key": N after its "name".
std::uint64_t json_figure(const std::string& json, const std::string& name,
                          const std::string& key) {
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
    add(Record{.op = Op::mark,
               .label = label,
               .label_length = static_cast<std::uint32_t>(std::strlen(label))});
  };
  const std::uint64_t kLarge = 200 << 10, kBase = 0x7f0000000000ull;
  for (std::uint64_t i = 0; i < 48; ++i)
    add(Record{.op = Op::malloc, .size = kLarge, .result = kBase + i * (1 << 20)});
  mark("large");
  for (std::uint64_t i = 0; i < 20000; ++i)
    add(Record{.op = i % 2 ? Op::malloc : Op::calloc,
               .size = 24 + i % 200,
               .count = i % 2 ? 0u : 1u,
               .result = kBase + (1ull << 32) + i * 256});
  mark("small");
  for (std::uint64_t i = 0; i < 20000; i += 2)
    add(Record{.op = Op::free, .input = kBase + (1ull << 32) + i * 256});
  mark("half of the small freed");
  end = put_end(end, records);
  bytes.resize(static_cast<std::size_t>(end - bytes.data()));
  fs::path trace = dir_ / "synthetic", json = dir_ / "figures.json";
  write_bytes(trace, bytes);

  Child replay =
      run({replayer(container()).string(), "--json", json.string(), trace.string()}, {}, dir_);
  ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  std::string figures = slurp(json);
  EXPECT_GT(expect_within_headroom(figures, "synthetic"), 0);
  EXPECT_NE(figures.find("\"writes_blocks\": true"), std::string::npos);
  EXPECT_GE(json_figure(figures, "large", "resident"), 48 * kLarge) << "blocks not written";
  EXPECT_EQ(json_figure(figures, "large", "live_requested"), 48 * kLarge);
  EXPECT_EQ(json_figure(figures, "peak", "ops"), 48u + 1 + 20000);
  for (const char* name : {"large", "small", "half of the small freed", "peak", "end"}) {
    SCOPED_TRACE(name);
    std::uint64_t committed = json_figure(figures, name, "committed");
    EXPECT_EQ(committed,
              json_figure(figures, name, "allocated") + json_figure(figures, name, "waste") +
                  json_figure(figures, name, "dirty") + json_figure(figures, name, "bookkeeping") +
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
  expect_same_choices(trace, "500", true);
}

}  // namespace
}  // namespace runsel_trace_test
