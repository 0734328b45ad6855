// Bad input: interior, misaligned and foreign pointers given to free, realloc
// and delete[], and a re-entry from a signal handler.
#include <thread>

#include "bad_input.h"

namespace bad_input {
namespace {

void interior(size_t size, size_t offset) {
  char* p = static_cast<char*>(opaque(malloc(size)));
  free(announce(p + offset));
}
void interior_small() { interior(kSmall, 16); }
void misaligned_small() { interior(kSmall, 1); }
void interior_large() { interior(kLarge, 4096); }
void interior_huge() { interior(kHuge, kChunk); }
void foreign_mmap() {
  void* map = mmap(nullptr, 3 * kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uintptr_t aligned = (reinterpret_cast<uintptr_t>(map) + kChunk - 1) & ~(kChunk - 1);
  memset(reinterpret_cast<void*>(aligned), 0xA5, kChunk);  // a garbage "chunk header"
  free(announce(reinterpret_cast<char*>(aligned) + 4096));
}
void foreign_glibc() { free(announce(opaque(__libc_malloc(64)))); }
void stack_memory() {
  char on_stack[64];
  free(announce(opaque(static_cast<void*>(on_stack))));
}
char g_static_buffer[64];
void static_memory() { free(announce(opaque(static_cast<void*>(g_static_buffer)))); }
void realloc_freed(size_t size) {
  void* keep = opaque(malloc(size));
  void* p = opaque(malloc(size));
  free(p);
  opaque(realloc(announce(p), 2 * size));
  free(keep);
}
void realloc_freed_small() { realloc_freed(kSmall); }
// Freed by a thread that has not allocated: queued for this thread's arena,
// its run's bitmap still says allocated; realloc within its class would keep
// it in place.
void realloc_remotely_freed_small() {
  void* keep = opaque(malloc(kSmall));
  void* p = opaque(malloc(kSmall));
  std::thread([p] { free(p); }).join();
  opaque(realloc(announce(p), kSmall - 8));
  free(keep);
}
void realloc_freed_large() { realloc_freed(kLarge); }
void realloc_freed_huge() { realloc_freed(kHuge); }
void realloc_interior() {
  char* p = static_cast<char*>(opaque(malloc(256)));
  opaque(realloc(announce(p + 32), 1000));
}
void realloc_foreign() { opaque(realloc(announce(opaque(__libc_malloc(64))), 128)); }
void delete_interior() {
  char* p = new char[100];
  delete[] static_cast<char*>(announce(p + 48));
}

// malloc and free from a signal handler that interrupts malloc or free on the
// same thread (undefined behaviour, but real programs do it). SIGPROF rather
// than SIGALRM, which is the watchdog: a child that deadlocks dies of it.
void signal_handler_reentry() {
  struct sigaction action = {};
  action.sa_handler = [](int) { free(opaque(malloc(48))); };
  sigaction(SIGPROF, &action, nullptr);
  struct itimerval every_50us = {{0, 50}, {0, 50}};
  setitimer(ITIMER_PROF, &every_50us, nullptr);
  alarm(10);
  for (long i = 0; i < 200 * 1000 * 1000; ++i) free(opaque(malloc(32 + i % 64)));
}

// A handler that only frees (blocks allocated before): with the thread cache,
// the inline free must find the thread inside an operation too, not only the
// inline malloc.
void* g_handler_blocks[20000];
volatile sig_atomic_t g_handler_next = 0;
void signal_handler_free_reentry() {
  for (void*& block : g_handler_blocks) block = opaque(malloc(48));
  struct sigaction action = {};
  action.sa_handler = [](int) {
    if (g_handler_next < static_cast<sig_atomic_t>(sizeof g_handler_blocks / sizeof(void*)))
      free(g_handler_blocks[g_handler_next++]);
  };
  sigaction(SIGPROF, &action, nullptr);
  struct itimerval every_50us = {{0, 50}, {0, 50}};
  setitimer(ITIMER_PROF, &every_50us, nullptr);
  alarm(10);
  for (long i = 0; i < 200 * 1000 * 1000; ++i) free(opaque(malloc(32 + i % 64)));
}

}  // namespace

std::vector<Row> bad_pointer_rows() {
  return {
      {"free of an interior pointer (small, +16)", nullptr, interior_small, "free",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)",
       nullptr},
      {"free of a misaligned pointer (small, +1)", nullptr, misaligned_small, "free",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)",
       nullptr},
      {"free of an interior pointer (large, +4096)", nullptr, interior_large, "free",
       "not the start of a large allocation (an interior pointer, or a stale one into "
       "memory reused since)",
       nullptr},
      {"free of an interior pointer (huge, +1 MiB)", nullptr, interior_huge, "free",
       "not the start of a huge allocation (interior pointer)", nullptr},
      {"`delete[]` of an interior pointer", nullptr, delete_interior, "free",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)",
       nullptr},
      {"free of a foreign pointer (mmap'd chunk-aligned memory with a garbage header)", nullptr,
       foreign_mmap, "free", "not allocated by runsel (foreign pointer)", nullptr},
      {"free of glibc's `__libc_malloc` block", nullptr, foreign_glibc, "free",
       "not allocated by runsel (foreign pointer)", nullptr},
      {"free of stack memory", nullptr, stack_memory, "free",
       "not allocated by runsel (foreign pointer)", nullptr},
      {"free of static memory", nullptr, static_memory, "free",
       "not allocated by runsel (foreign pointer)", nullptr},
      {"realloc of a freed small block", nullptr, realloc_freed_small, "realloc",
       "double free of a small region", nullptr},
      {"realloc of a small block another thread freed (queued for its arena), within its class",
       nullptr, realloc_remotely_freed_small, "realloc", "double free of a small region", nullptr},
      {"realloc of a freed large block", nullptr, realloc_freed_large, "realloc",
       "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"realloc of a freed huge block", nullptr, realloc_freed_huge, "realloc",
       "double free of a huge allocation", nullptr},
      {"realloc of an interior pointer", nullptr, realloc_interior, "realloc",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)",
       nullptr},
      {"realloc of glibc's block", nullptr, realloc_foreign, "realloc",
       "not allocated by runsel (foreign pointer)", nullptr},
      {"`malloc`/`free` in a signal handler that interrupted `malloc`/`free` on the same thread",
       nullptr, signal_handler_reentry, nullptr,
       "runsel: malloc or free re-entered on a thread that is inside the allocator (called from "
       "a signal handler?): aborting instead of deadlocking",
       nullptr},
      {"`free` alone in a signal handler that interrupted `malloc`/`free` on the same thread",
       nullptr, signal_handler_free_reentry, nullptr,
       "runsel: malloc or free re-entered on a thread that is inside the allocator (called from "
       "a signal handler?): aborting instead of deadlocking",
       nullptr},
  };
}

}  // namespace bad_input
