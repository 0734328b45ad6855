// Mozilla logalloc logs: parsing every function per process, a malformed line
// named by its number and quoted printably, a round trip through the text
// format giving the same replay figures, and a live set beyond memory refused.
#include <gtest/gtest.h>

#include "trace_support.h"

namespace runsel_trace_test {
namespace {

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
  const char* const lines[] = {"900 900 malloc(40)=0x7f0000001000",
                               "900 77 calloc(2,100)=0x7f0000002000",
                               "901 5 malloc(10)=0x5500a0",
                               "900 900 realloc(0x7f0000001000,80)=0x7f0000003000",
                               "900 900 posix_memalign(64,300)=0x0",
                               "900 900 jemalloc_stats()",
                               "900 77 free(0x7f0000003000)",
                               "900 900 free(0x0)",
                               "900 900 aligned_alloc(128,256)=0x7F0000005000",
                               "900 900 memalign(32,33)=(nil)",
                               "900  900 valloc(5000)=0x7f0000008000\r",
                               "900 900 realloc(0x0,7)=0x7f0000009000"};
  LogallocParser parser;
  for (const char* line : lines)
    ASSERT_TRUE(parser.line(line, std::strlen(line))) << parser.error();
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
  const Expected expected[] = {{Op::malloc, 0, 0, 40, 0, 0, 0x7f0000001000},
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
  EXPECT_EQ(parser.error(), "line 1, column 13: expected ')': 1 2 free(0x1\\xff\\x00\\x0a\\x5c)");
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
      "f = open('" +
      marks.string() +
      "', 'r+b')\n"
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
  Child python =
      run({kPython, "-c", program},
          {"PYTHONMALLOC=malloc", std::string("LD_PRELOAD=") + RUNSEL_TRACE_RECORDER,
           "RUNSEL_TRACE=" + (dir_ / "trace.%p").string(), "RUNSEL_TRACE_MARKS=" + marks.string()},
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
  Child compressed =
      run({RUNSEL_TRACE_CONVERT, "from-logalloc", log.string(), (dir_ / "back.gz.trace").string()},
          {}, dir_);
  ASSERT_TRUE(WIFEXITED(compressed.status) && WEXITSTATUS(compressed.status) == 0)
      << compressed.err;
  EXPECT_EQ(read_bytes(dir_ / "back.gz.trace"), read_bytes(back)) << "plain and gzip alike";
  Child other = run({RUNSEL_TRACE_CONVERT, "from-logalloc", "--pid", "4242", text.string(),
                     (dir_ / "other").string()},
                    {}, dir_);
  ASSERT_TRUE(WIFEXITED(other.status) && WEXITSTATUS(other.status) == 0) << other.err;
  EXPECT_EQ(summarize(read_bytes(dir_ / "other")).records, 2u);
  Child missing = run({RUNSEL_TRACE_CONVERT, "from-logalloc", "--pid", "4243", text.string(),
                       (dir_ / "none").string()},
                      {}, dir_);
  EXPECT_TRUE(WIFEXITED(missing.status) && WEXITSTATUS(missing.status) == 2) << missing.err;

  fs::path original_json = dir_ / "original.json", back_json = dir_ / "back.json";
  for (const auto& [input, json] : {std::pair{trace, original_json}, std::pair{back, back_json}}) {
    Child replay =
        run({replayer(container()).string(), "--json", json.string(), input.string()}, {}, dir_);
    ASSERT_TRUE(WIFEXITED(replay.status) && WEXITSTATUS(replay.status) == 0) << replay.err;
  }
  std::string original = slurp(original_json), converted = slurp(back_json);
  EXPECT_GT(expect_within_headroom(converted, "logalloc"), 0);
  EXPECT_NE(original.find("\"name\": \"round 2 thinned\""), std::string::npos);
  EXPECT_NE(converted.find("\"name\": \"jemalloc_stats #6 (line "), std::string::npos);
  EXPECT_EQ(figures_without_names(original), figures_without_names(converted));
  expect_same_choices(back, "2000", true);
}

// --- bad input ------------------------------------------------------------------------

// A trace is only a claim: a few records can claim more live memory than the
// machine has, and the replay writes every live block. Such a trace is refused
// before any call (exit 2, one line naming the peak and the bound), and replays
// with --allow-large-live-set (here the pebibyte cannot be had: counted as failed).
TEST_F(TraceTest, ALiveSetBeyondMemoryIsRefusedUnlessAllowed) {
  LogallocParser parser;
  for (const char* line :
       {"7 1 malloc(16)=0x1000", "7 1 malloc(1125899906842624)=0x10000000", "7 1 free(0x10000000)"})
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

}  // namespace
}  // namespace runsel_trace_test
