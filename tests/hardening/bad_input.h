// Shared by the bad-input tests: bad_input_test.cpp runs the table, whose rows
// (each a misuse, what runsel does, and the code that tries it) are written by
// subject in bad_input_double_free.cpp, bad_input_pointers.cpp,
// bad_input_refused.cpp and bad_input_corruption.cpp.
#pragma once

#include <errno.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/child.h"
#include "support/heap.h"

extern "C" void* pvalloc(size_t size) noexcept;
extern "C" void* valloc(size_t size) noexcept;
extern "C" void* reallocarray(void* p, size_t count, size_t size) noexcept;
extern "C" void* __libc_malloc(size_t size) noexcept;  // glibc's own malloc
extern "C" void __libc_free(void* p) noexcept;

// The misuses below are deliberate; GCC sees some of them through opaque().
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

namespace bad_input {

using runsel_test::kChunk;
using runsel_test::opaque;

inline constexpr size_t kSmall = 64, kLarge = 64 * 1024, kHuge = 3 * kChunk;
inline constexpr size_t kTooBig = size_t{PTRDIFF_MAX} + 1;

struct Row {
  const char* misuse;
  const char* behaviour;  // Markdown, as in memory/README.md (aborting rows: made from the message)
  void (*aborts)();       // a misuse that must abort with the one line
  const char* function;   // "runsel: FUNCTION(P): PROBLEM"; null: PROBLEM is the whole line
  const char* problem;
  std::string (*check)();  // or a misuse that is refused or tolerated
};

// A misuse that aborts runs in a forked child, which names the pointer it is
// about to pass first: announce(p) writes it ("%p") to g_pointer_pipe, set by
// the parent's expect_abort(), and returns p.
extern int g_pointer_pipe;
void* announce(void* p);

// The table's rows by subject, in memory/README.md's order: double frees, other bad
// pointers, refused calls, damaged metadata, then what a successful call
// leaves.
std::vector<Row> double_free_rows();  // bad_input_double_free.cpp
std::vector<Row> bad_pointer_rows();  // bad_input_pointers.cpp
std::vector<Row> refused_rows();      // bad_input_refused.cpp
std::vector<Row> corruption_rows();   // bad_input_corruption.cpp
std::vector<Row> success_rows();      // bad_input_refused.cpp

}  // namespace bad_input
