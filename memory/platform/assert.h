// Cheap assertions: O(1) checks of the invariants at the seams (a bin and its
// container, a run and its bin) and of the preconditions callers must meet
// (alignments, page multiples, a lock held). On in debug builds (NDEBUG
// unset), in checked builds (-Dchecked=true) and wherever RUNSEL_ASSERTIONS is
// defined (the unit tests); in release builds the condition is compiled but
// never evaluated. The expensive O(n) walkers are the containers' check(),
// run by the checked build and the tests.
#pragma once

#include "platform/fatal.h"

#if !defined(NDEBUG) || defined(RUNSEL_CHECKED) || defined(RUNSEL_ASSERTIONS)
#define RUNSEL_ASSERTIONS_ON 1
#else
#define RUNSEL_ASSERTIONS_ON 0
#endif

namespace runsel {

inline constexpr bool kAssertions = RUNSEL_ASSERTIONS_ON;

// The expensive walkers run inside the allocator only in a checked build.
inline constexpr bool kChecked =
#if defined(RUNSEL_CHECKED)
    true;
#else
    false;
#endif

// Writes "runsel: assertion failed: FILE:LINE: CONDITION" and aborts.
[[noreturn, gnu::cold, gnu::noinline]] inline void assertion_failed(const char* file, int line,
                                                                    const char* condition) {
  fatal("assertion failed: ", file, ":", line, ": ", condition);
}

}  // namespace runsel

// The condition is always compiled (so it cannot rot), and evaluated only
// when assertions are on.
#define RUNSEL_ASSERT(condition)                                  \
  do {                                                            \
    if (::runsel::kAssertions && !(condition)) {                  \
      ::runsel::assertion_failed(__FILE__, __LINE__, #condition); \
    }                                                             \
  } while (false)
