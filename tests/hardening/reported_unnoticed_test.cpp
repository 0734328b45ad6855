// The misuses reported as going unnoticed, run as users met them:
// tests/hardening/reported_unnoticed.c, a plain C program, under LD_PRELOAD of
// this test's variant, or of the library RUNSEL_PRELOAD_LIBRARY names (the
// thread-cache libraries, which the main build makes for four containers).
// A misuse must abort with runsel's one line naming the pointer the program
// announced; a valid program (the fork handlers) must run to its end.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <string>

#include "support/heap.h"
#include "support/program_runner.h"

namespace {

std::string preload_library() {
  const char* named = getenv("RUNSEL_PRELOAD_LIBRARY");
  return named != nullptr && *named != '\0' ? std::string(named) : runsel_test::library_path();
}

runsel_test::Outcome run_scenario(const std::string& scenario, runsel_test::EnvChanges env = {}) {
  runsel_test::ScratchDir scratch;
  EXPECT_FALSE(scratch.path.empty());
  struct rlimit no_core = {0, 0};  // the program is meant to abort
  setrlimit(RLIMIT_CORE, &no_core);
  env.emplace_back("LD_PRELOAD", preload_library());
  return runsel_test::run({RUNSEL_REPORTED_UNNOTICED, scenario}, env, "", scratch.path);
}

// The pointer the program announced ("misuse of 0x...").
std::string announced(const runsel_test::Outcome& outcome) {
  const std::string prefix = "misuse of ";
  if (outcome.out.rfind(prefix, 0) != 0) return "";
  return outcome.out.substr(prefix.size(), outcome.out.find('\n') - prefix.size());
}

// The program aborted with exactly one line on stderr, "runsel: FUNCTION(P): ..."
// with P the announced pointer, and `problem` in it.
void expect_abort_naming(const runsel_test::Outcome& outcome, const std::string& function,
                         const std::string& problem) {
  const std::string pointer = announced(outcome);
  ASSERT_FALSE(pointer.empty()) << "the program did not reach its misuse: " << outcome.out
                                << outcome.err;
  EXPECT_TRUE(WIFSIGNALED(outcome.status) && WTERMSIG(outcome.status) == SIGABRT)
      << "status " << outcome.status << "; stdout: " << outcome.out;
  EXPECT_EQ(outcome.err.rfind("runsel: " + function + "(" + pointer + "): ", 0), 0u)
      << "stderr: " << outcome.err;
  EXPECT_NE(outcome.err.find(problem), std::string::npos) << "stderr: " << outcome.err;
  EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
}

// Freed by a thread of no arena (queued for the owner's), then by the owner:
// the owner's free takes the queue in (or, with a thread cache, finds the
// queue's key and takes it in) before it frees or caches the block.
TEST(ReportedUnnoticed, RemoteFreeThenTheOwnersFreeAborts) {
  expect_abort_naming(run_scenario("remote_then_own_free"), "free",
                      "double free of a small region");
}

// The same with one arena for the process, when the freeing thread has not
// allocated yet.
TEST(ReportedUnnoticed, RemoteFreeThenTheOwnersFreeAbortsWithOneArena) {
  expect_abort_naming(run_scenario("remote_then_own_free", {{"RUNSEL_ARENAS", "1"}}), "free",
                      "double free of a small region");
}

// realloc of a block another thread freed, within its class (in place).
TEST(ReportedUnnoticed, ReallocOfARemotelyFreedBlockAborts) {
  expect_abort_naming(run_scenario("remote_then_realloc"), "realloc",
                      "double free of a small region");
}

// malloc_usable_size of a block another thread freed: 0, as for any free block.
TEST(ReportedUnnoticed, UsableSizeOfARemotelyFreedBlockIsZero) {
  const runsel_test::Outcome outcome = run_scenario("remote_then_usable");
  ASSERT_FALSE(announced(outcome).empty()) << outcome.out << outcome.err;
  EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0)
      << "status " << outcome.status << "; stderr: " << outcome.err;
  EXPECT_NE(outcome.out.find("usable 0\n"), std::string::npos) << outcome.out;
}

// One byte written past a block into a neighbour queued for its arena: the
// take-in finds the neighbour's first word damaged and names it.
TEST(ReportedUnnoticed, AnOverflowIntoAQueuedBlockAbortsNamingIt) {
  expect_abort_naming(run_scenario("overflow_into_queued"), "free", "written after its free");
}

// A fork handler registered from a constructor, before the first malloc,
// allocates in all three handlers: fork works, and so does the child.
TEST(ReportedUnnoticed, AForkHandlerRegisteredBeforeTheFirstMallocMayAllocate) {
  const runsel_test::Outcome outcome = run_scenario("atfork");
  EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0)
      << "status " << outcome.status << "; stderr: " << outcome.err;
  EXPECT_NE(outcome.out.find("forked; child exited 0; handlers allocated 2 times in the parent"),
            std::string::npos)
      << outcome.out << outcome.err;
  EXPECT_EQ(outcome.err, "");
}

TEST(ReportedUnnoticed, RunsOnTheExpectedVariant) {
  EXPECT_TRUE(runsel_test::RunsExpectedVariant());
}

}  // namespace
