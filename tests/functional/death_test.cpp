// Death tests: double frees, interior and foreign pointers abort with one line naming the pointer.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "runsel.h"
#include "support/blocks.h"
#include "support/child.h"
#include "support/heap.h"

namespace {

using runsel_test::kChunk;
using runsel_test::opaque;

std::string pointer_text(const void* p) {
  char text[32];
  snprintf(text, sizeof text, "%p", p);
  return text;
}

// The whole line: "runsel: FUNCTION(POINTER): ...PROBLEM...".
std::string message(const char* function, const void* p, const char* problem) {
  return std::string("runsel: ") + function + "\\(" + pointer_text(p) + "\\): [^\n]*(" + problem +
         ")";
}

const char* const kDoubleFree = "double free";
const char* const kInterior = "not the start of";
const char* const kForeign = "not allocated by runsel";

// Keeps aborting children from writing core files.
void no_core_dump() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

// The "fast" style forks without re-executing: the child has the same
// addresses as the parent, so the expected message can name the pointer
// (a re-executed child would see other addresses under ASLR). These tests
// start no threads, so forking is safe.
class Death : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "fast"); }
};

#define EXPECT_ABORT(statement, regex) \
  EXPECT_EXIT((no_core_dump(), statement), testing::KilledBySignal(SIGABRT), regex)

// Both frees happen in the child: between a free in the parent and the
// fork, gtest allocates and could be handed the freed block again.
void free_twice(void* p) {
  free(opaque(p));
  free(p);
}
void free_then_realloc(void* p) {
  free(opaque(p));
  opaque(realloc(p, 128));
}

TEST_F(Death, DoubleFreeSmall) {
  void* neighbour = opaque(malloc(64));  // keeps the run alive
  void* p = opaque(malloc(64));
  EXPECT_ABORT(free_twice(p), message("free", p, kDoubleFree));
  free(p);
  free(neighbour);
}

TEST_F(Death, DoubleFreeLarge) {
  void* neighbour = opaque(malloc(64 * 1024));  // keeps the chunk alive
  void* p = opaque(malloc(64 * 1024));
  EXPECT_ABORT(free_twice(p), message("free", p, kDoubleFree));
  free(p);
  free(neighbour);
}

TEST_F(Death, DoubleFreeHuge) {
  void* p = opaque(malloc(3 * kChunk));
  EXPECT_ABORT(free_twice(p), message("free", p, kDoubleFree));
  free(p);
}

TEST_F(Death, InteriorPointerSmall) {
  char* p = static_cast<char*>(opaque(malloc(64)));
  EXPECT_ABORT(free(opaque(p + 16)), message("free", p + 16, kInterior));
  EXPECT_ABORT(free(opaque(p + 8)), message("free", p + 8, kInterior));
  EXPECT_ABORT(free(opaque(p + 1)), message("free", p + 1, kInterior));
  free(p);
}

TEST_F(Death, InteriorPointerLarge) {
  char* p = static_cast<char*>(opaque(malloc(64 * 1024)));
  EXPECT_ABORT(free(opaque(p + 4096)), message("free", p + 4096, kInterior));
  EXPECT_ABORT(free(opaque(p + 100)), message("free", p + 100, kInterior));
  free(p);
}

TEST_F(Death, InteriorPointerHuge) {
  char* p = static_cast<char*>(opaque(malloc(3 * kChunk)));
  EXPECT_ABORT(free(opaque(p + kChunk)), message("free", p + kChunk, kInterior));
  EXPECT_ABORT(free(opaque(p + 4096)), message("free", p + 4096, kInterior));
  free(p);
}

TEST_F(Death, StackPointer) {
  int on_stack = 0;
  void* p = opaque(static_cast<void*>(&on_stack));
  EXPECT_ABORT(free(p), message("free", p, kForeign));
}

// Memory runsel never handed out, including a chunk-aligned address whose
// "chunk header" is zeros or garbage.
TEST_F(Death, PointerNeverReturned) {
  void* map = mmap(nullptr, 3 * kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  uintptr_t aligned = (reinterpret_cast<uintptr_t>(map) + kChunk - 1) & ~(kChunk - 1);
  char* zero_chunk = reinterpret_cast<char*>(aligned);
  char* garbage_chunk = zero_chunk + kChunk;
  memset(garbage_chunk, 0xA5, kChunk);
  for (char* p : {zero_chunk + 64, zero_chunk + 8192, garbage_chunk + 64, garbage_chunk + 8192})
    EXPECT_ABORT(free(opaque(p)), message("free", p, kForeign));
  EXPECT_ABORT(free(opaque(static_cast<char*>(map) + 16)),
               message("free", static_cast<char*>(map) + 16, kForeign));
  munmap(map, 3 * kChunk);
}

TEST_F(Death, ReallocOfAFreedPointer) {
  void* neighbour = opaque(malloc(64));
  void* p = opaque(malloc(64));
  EXPECT_ABORT(free_then_realloc(p),
               message("realloc", p, "double free|freed|not allocated by runsel"));
  free(p);
  free(neighbour);
}

TEST_F(Death, ReallocOfAnInteriorPointer) {
  char* p = static_cast<char*>(opaque(malloc(256)));
  EXPECT_ABORT(opaque(realloc(opaque(p + 32), 1000)), message("realloc", p + 32, kInterior));
  free(p);
}

// The report is exactly one line on stderr, and the process dies of SIGABRT.
TEST(DeathMessage, IsOneLine) {
  void* neighbour = opaque(malloc(48));
  void* p = opaque(malloc(48));
  const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] { free_twice(p); });
  const int status = child.status;
  const std::string& output = child.err;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) << "status " << status;
  std::string expected_start = "runsel: free(" + pointer_text(p) + "): ";
  EXPECT_EQ(output.compare(0, expected_start.size(), expected_start), 0) << output;
  EXPECT_NE(output.find(kDoubleFree), std::string::npos) << output;
  ASSERT_FALSE(output.empty());
  EXPECT_EQ(output.find('\n'), output.size() - 1) << "one line ending in a newline: " << output;
  free(p);
  free(neighbour);
}

}  // namespace
