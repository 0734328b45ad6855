// The reported double frees after a page changed size class, run as users met
// them: tests/hardening/reported_double_free.cpp, a plain program, under
// LD_PRELOAD of this test's variant. Each scenario must abort with runsel's
// one line naming the pointer the program freed twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <string>

#include "support/heap.h"
#include "support/program_runner.h"

namespace {

class ReportedDoubleFree : public testing::TestWithParam<const char*> {};

TEST_P(ReportedDoubleFree, AbortsNamingThePointer) {
  const std::string library = runsel_test::library_path();
  ASSERT_FALSE(library.empty());
  runsel_test::ScratchDir scratch;
  ASSERT_FALSE(scratch.path.empty());
  struct rlimit no_core = {0, 0};  // the program is meant to abort
  setrlimit(RLIMIT_CORE, &no_core);
  runsel_test::Outcome outcome = runsel_test::run({RUNSEL_REPORTED_DOUBLE_FREE, GetParam()},
                                                  {{"LD_PRELOAD", library}}, "", scratch.path);
  const std::string prefix = "double free of ";
  ASSERT_EQ(outcome.out.rfind(prefix, 0), 0u)
      << "the program did not reach its double free: " << outcome.out << outcome.err;
  const std::string pointer =
      outcome.out.substr(prefix.size(), outcome.out.find('\n') - prefix.size());
  EXPECT_TRUE(WIFSIGNALED(outcome.status) && WTERMSIG(outcome.status) == SIGABRT)
      << "status " << outcome.status << "; stdout: " << outcome.out;
  EXPECT_EQ(outcome.err.rfind("runsel: free(" + pointer + "): ", 0), 0u)
      << "stderr: " << outcome.err;
  EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ReportedDoubleFree,
                         testing::Values("fresh", "trim", "busy", "thread", "sweep"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST(ReportedDoubleFree, RunsOnTheExpectedVariant) {
  EXPECT_TRUE(runsel_test::RunsExpectedVariant());
}

}  // namespace
