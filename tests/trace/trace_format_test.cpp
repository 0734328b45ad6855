// The trace format's reader: every op round-trips, each kind of damage is
// reported at the offset of the first problem, mark records are checked, and
// seeded mutations of a recorded trace are each cleanly rejected by the
// replayer (exit 2 with the reader's offset) or replayed.
#include <gtest/gtest.h>

#include "trace_support.h"

namespace runsel_trace_test {
namespace {

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
  int mutations = count_text ? std::atoi(count_text) : static_cast<int>(runsel_test::scaled(60));
  SCOPED_TRACE(runsel_test::replay_hint(seed));

  fs::path trace = record_python({"-c", "x = {str(i): [i] * (i % 40) for i in range(3000)}"}, dir_);
  Bytes original = read_bytes(trace);
  ASSERT_TRUE(summarize(original).valid);
  expect_same_choices(trace, "1000");
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
}  // namespace runsel_trace_test
