// Front-end internals shared by the C API files: arena choice and the
// fatal-error path.
#pragma once

#include <cstddef>

#include "arena/arena.h"

// A C function of the public API (runsel.h): exported from the library, which
// is otherwise built with hidden visibility.
#define RUNSEL_EXPORT extern "C" __attribute__((visibility("default")))

namespace runsel {

inline constexpr std::size_t kMaxArenas = 64;
// Arenas created at most per CPU by default (RUNSEL_ARENAS overrides the
// product; init.cpp). One, not jemalloc's four: each arena keeps its own
// dirty pages and partly used runs, so a program's threads in more arenas
// hold more memory. On the bench programs (experiments/bench/README.md,
// 2 CPUs, 11 rounds), one per CPU against four, in geometric mean against
// glibc: peak RSS 0.92x against 1.18x (stress 0.93x against 1.25x), minor
// faults 0.75x against 1.09x, time 1.27x against 1.32x. One arena for the
// process (mozjemalloc's default arena, which every thread uses unless it
// opts in to its own) was leaner still (0.73x) but serialised the threads
// on its lock (time 2.2x glibc's).
inline constexpr std::size_t kArenasPerCpu = 1;

extern constinit thread_local Arena* t_arena;
// Attaches the calling thread to the least loaded arena (init.cpp); the slow
// path of thread_arena.
Arena* choose_arena();

// The calling thread's arena (chosen on first use).
inline Arena* thread_arena() {
  Arena* arena = t_arena;
  if (__builtin_expect(arena != nullptr, 1)) return arena;
  return choose_arena();
}
// The purge policy in force (the build's default unless RUNSEL_CONF set one).
PurgePolicy purge_policy();
// Whether RUNSEL_CONF chose the as-built profile (profile:as_built).
bool as_built_profile();
// Arenas created so far; entries past arena_count() are null.
std::size_t arena_count();
Arena* arena_at(std::size_t index);

// Writes "runsel: FUNCTION(POINTER): PROBLEM" on stderr and aborts.
[[noreturn]] void fatal_pointer(const char* function, const void* pointer, const char* problem);
// Writes "runsel: FUNCTION(POINTER): heap corruption: ..." naming the small
// run whose header failed its check, and aborts.
[[noreturn]] void fatal_corrupt_run(const char* function, const void* pointer, const void* run);
// The message for `problem` (Arena::classify's verdict on `p` in `chunk`).
[[noreturn]] void fatal_bad_pointer(const char* function, const void* p, Chunk* chunk,
                                    BadPointer problem);
// A pointer outside the arenas that huge::release refused.
[[noreturn]] void fatal_huge(const char* function, const void* p, huge::Problem problem);
// A pointer the chunk registry does not know.
[[noreturn]] void fatal_unregistered(const char* function, const void* p);

}  // namespace runsel
