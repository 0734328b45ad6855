// Shared by the recorder's two halves (tools/firefox/README.md): recorder.c writes
// the log (the wrappers, the per-process files, the marks) and audit.c is the
// dynamic linker's audit interface (which bindings get a wrapper, the data slots
// rewritten). Both are one library, librunsel-firefox-audit.so.
#ifndef RUNSEL_FIREFOX_RECORDER_H
#define RUNSEL_FIREFOX_RECORDER_H

#include <stdbool.h>
#include <stdint.h>

// The functions wrapped, in this order; the exits last (from FIRST_EXIT on), wrapped
// wherever they are defined (libc), to finish the log first.
enum Function {
  F_MALLOC,
  F_CALLOC,
  F_REALLOC,
  F_FREE,
  F_MEMALIGN,
  F_POSIX_MEMALIGN,
  F_ALIGNED_ALLOC,
  F_VALLOC,
  F_STRDUP,
  F_STRNDUP,
  F_XMALLOC,
  F_XCALLOC,
  F_XREALLOC,
  F_XMEMALIGN,
  F_XSTRDUP,
  F_XSTRNDUP,
  F_XMEMDUP,
  F_ARENA_MALLOC,
  F_ARENA_CALLOC,
  F_ARENA_REALLOC,
  F_ARENA_FREE,
  F_ARENA_MEMALIGN,
  F_EXIT,
  F_UNDERSCORE_EXIT,
  F_CAPITAL_EXIT,
  F_COUNT
};
#define FIRST_EXIT F_EXIT

extern const char* const function_names[F_COUNT];
extern uintptr_t real[F_COUNT];        // the executable's (or libc's) definitions
extern uintptr_t wrapper[F_COUNT];     // ours
int function_named(const char* name);  // its Function, or -1

// Recording in this process: the program is Firefox's. `lookup` gives the address of
// one of the executable's exports (0 when it has none).
void start_recording(uintptr_t (*lookup)(const char* name));
bool recording(void);
// Once the executable's allocator can run: whether its stats layout is the known one.
void check_stats_layout(void);
// At exit: an "exit" mark, then the end of the gzip stream.
void finish_log(void);

#endif
