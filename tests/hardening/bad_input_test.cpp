// Bad input, listed: every misuse runsel is tested against and what it does.
// The rows (bad_input.h, written by subject in bad_input_*.cpp) are the
// bad-input table of memory/README.md, "Behaviour a user can rely on"
// (RUNSEL_BAD_INPUT_TABLE=<path> writes it as Markdown); each row is run as
// its own test.
#include "bad_input.h"

namespace bad_input {

int g_pointer_pipe = -1;

void* announce(void* p) {
  char text[32];
  int n = snprintf(text, sizeof text, "%p", p);
  if (write(g_pointer_pipe, text, n) != n) _exit(3);
  return opaque(p);
}

namespace {

const std::vector<Row>& rows() {
  static const std::vector<Row> table = [] {
    std::vector<Row> all;
    for (std::vector<Row> (*part)() :
         {double_free_rows, bad_pointer_rows, refused_rows, corruption_rows, success_rows}) {
      const std::vector<Row> rows = part();
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }();
  return table;
}

std::string behaviour(const Row& row) {
  if (!row.aborts) return row.behaviour;
  if (!row.function) return std::string("abort (SIGABRT), one line: `") + row.problem + "`";
  return std::string("abort (SIGABRT), one line: `runsel: ") + row.function +
         "(P): " + row.problem + "`";
}

std::string markdown_table() {
  std::string text = "| misuse | what runsel does |\n| --- | --- |\n";
  for (const Row& row : rows())
    text += std::string("| ") + row.misuse + " | " + behaviour(row) + " |\n";
  return text;
}

// Runs an aborting row in a child; the child's stderr must be exactly
// "runsel: FUNCTION(P): PROBLEM\n" with P the pointer it announced,
// and the child must die of SIGABRT.
void expect_abort(const Row& row) {
  int pointer_pipe[2];
  ASSERT_EQ(pipe(pointer_pipe), 0);
  const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
    close(pointer_pipe[0]);
    g_pointer_pipe = pointer_pipe[1];
    row.aborts();  // returning means the misuse went unnoticed
  });
  close(pointer_pipe[1]);
  std::string pointer;
  char buffer[64];
  for (ssize_t n; (n = read(pointer_pipe[0], buffer, sizeof buffer)) > 0;)
    pointer.append(buffer, n);
  close(pointer_pipe[0]);
  const int status = child.status;
  const std::string& err = child.err;
  EXPECT_TRUE(runsel_test::died_of_abort(status)) << "status " << status << ", stderr: " << err;
  if (!row.function) {
    EXPECT_EQ(err, std::string(row.problem) + "\n");
    printf("observed: %s", err.c_str());
    return;
  }
  ASSERT_FALSE(pointer.empty()) << "the child died before the misuse; stderr: " << err;
  EXPECT_EQ(err,
            std::string("runsel: ") + row.function + "(" + pointer + "): " + row.problem + "\n");
  printf("observed: %s", err.c_str());
}

class BadInput : public testing::TestWithParam<size_t> {};

TEST_P(BadInput, DoesWhatTheTableSays) {
  const Row& row = rows()[GetParam()];
  SCOPED_TRACE(row.misuse);
  if (row.aborts) {
    expect_abort(row);
  } else {
    std::string why = row.check();
    EXPECT_EQ(why, "") << behaviour(row);
    EXPECT_EQ(runsel_check(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, BadInput, testing::Range(size_t{0}, rows().size()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           std::string name = "row" + std::to_string(info.param) + "_";
                           for (const char* c = rows()[info.param].misuse; *c && name.size() < 60;
                                ++c)
                             name += isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
                           return name;
                         });

// The document's table, from its header line to the first line that is not a
// table row; empty when the document has no such header.
std::string readme_table(const std::string& readme) {
  const std::string header = "| misuse | what runsel does |\n";
  size_t begin = readme.find(header);
  if (begin == std::string::npos) return "";
  size_t end = begin;
  while (end < readme.size() && readme[end] == '|') {
    size_t line_end = readme.find('\n', end);
    end = line_end == std::string::npos ? readme.size() : line_end + 1;
  }
  return readme.substr(begin, end - begin);
}

// memory/README.md lists every misuse tried, as this table, and nothing else:
// its table (written by hand or pasted) must be this one row for row.
// RUNSEL_BAD_INPUT_TABLE=<path> writes the table to paste there when a row changes.
TEST(BadInputTable, ReadmeHasTheTable) {
  std::string table = markdown_table();
  if (const char* path = getenv("RUNSEL_BAD_INPUT_TABLE")) {
    std::ofstream(path) << table;
  }
  std::ifstream readme(std::string(RUNSEL_SOURCE_DIR) + "/memory/README.md");
  ASSERT_TRUE(readme) << RUNSEL_SOURCE_DIR "/memory/README.md";
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_EQ(readme_table(text.str()), table)
      << "memory/README.md's bad-input table (\"Behaviour a user can rely on\") is not the "
         "tested one; regenerate it with RUNSEL_BAD_INPUT_TABLE=<path> and paste it in";
}

TEST(BadInput, RunsOnTheExpectedVariant) { EXPECT_TRUE(runsel_test::RunsExpectedVariant()); }

}  // namespace
}  // namespace bad_input
