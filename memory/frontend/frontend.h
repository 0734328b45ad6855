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
// Arenas created so far; entries past arena_count() are null.
std::size_t arena_count();
Arena* arena_at(std::size_t index);

// Writes "runsel: FUNCTION(POINTER): PROBLEM" on stderr and aborts.
[[noreturn]] void fatal_pointer(const char* function, const void* pointer, const char* problem);
// Writes "runsel: FUNCTION(POINTER): heap corruption: ..." naming the small
// run whose header failed its check, and aborts.
[[noreturn]] void fatal_corrupt_run(const char* function, const void* pointer, const void* run);

}  // namespace runsel
