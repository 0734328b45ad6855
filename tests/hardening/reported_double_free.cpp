// The double frees users reported, as they met them: a plain program (no
// runsel headers, nothing linked) that the test runs under LD_PRELOAD of each
// variant. It prints the pointer it is about to free a second time on stdout
// ("double free of 0x..."), then frees it. Reaching the end means the misuse
// went unnoticed: it then says whether a later malloc handed out a block that
// is still live (two owners of one block) and exits 0.
//
//   reported_double_free fresh    one 64 B block in a fresh process, freed;
//                                 32 B blocks until its page is reused; free again
//   reported_double_free trim     the same with malloc_trim(0) before the 32 B blocks
//   reported_double_free busy     the main arena busy: 5,000 blocks of 64 B freed
//                                 (p the first), 32 B blocks, free p again
//   reported_double_free thread   the busy case in a thread's own arena
//   reported_double_free sweep    fresh, then 20,000 small frees (the kept
//                                 empty run is swept back) before the 32 B blocks
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The double free is the point of this program.
#pragma GCC diagnostic ignored "-Wuse-after-free"

namespace {

constexpr int kMaxHeld = 200000;
void* g_held[kMaxHeld];  // static: the program's own bookkeeping allocates nothing
int g_held_count = 0;

void* opaque(void* p) {
  asm volatile("" : "+r"(p));
  return p;
}

uintptr_t page_of(const void* p) { return reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095}; }

// Allocates 32 B blocks, keeping them, until one lies on p's page (and a few
// thousand more), or the bound: the 32 B class has then reused p's page if
// the allocator lets it.
void reuse_page_for_32_byte_blocks(void* p) {
  int after_hit = -1;
  while (g_held_count < kMaxHeld && after_hit != 0) {
    void* q = opaque(malloc(32));
    g_held[g_held_count++] = q;
    if (after_hit > 0) --after_hit;
    if (after_hit < 0 && page_of(q) == page_of(p)) after_hit = 4000;
  }
}

bool is_held(const void* q) {
  for (int i = 0; i < g_held_count; ++i)
    if (g_held[i] == q) return true;
  return false;
}

int free_again_and_report(void* p) {
  printf("double free of %p\n", p);
  fflush(stdout);
  free(opaque(p));
  void* a = opaque(malloc(32));
  void* b = opaque(malloc(32));
  printf("unnoticed; malloc(32) then gave %p and %p: %s\n", a, b,
         is_held(a) || is_held(b) ? "a block that is still live (two owners)" : "free blocks");
  return 0;
}

void* busy_case(void*) {
  static void* blocks[5000];
  for (void*& b : blocks) b = opaque(malloc(64));
  for (int i = 0; i < 5000; i += 3) free(opaque(malloc(16 + i % 200)));  // other classes too
  void* p = blocks[0];
  for (void* b : blocks) free(b);
  reuse_page_for_32_byte_blocks(p);
  free_again_and_report(p);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "";
  if (strcmp(scenario, "busy") == 0) {
    busy_case(nullptr);
    return 0;
  }
  if (strcmp(scenario, "thread") == 0) {
    // Busy main arena first, so that the thread's arena is its own.
    pthread_t thread;
    if (pthread_create(&thread, nullptr, busy_case, nullptr) != 0) return 3;
    pthread_join(thread, nullptr);
    return 0;
  }
  if (strcmp(scenario, "fresh") != 0 && strcmp(scenario, "trim") != 0 &&
      strcmp(scenario, "sweep") != 0) {
    fprintf(stderr, "usage: %s fresh|trim|busy|thread|sweep\n", argv[0]);
    return 2;
  }
  void* p = opaque(malloc(64));
  free(p);
  if (strcmp(scenario, "trim") == 0) malloc_trim(0);
  if (strcmp(scenario, "sweep") == 0) {
    for (int i = 0; i < 20000; ++i) free(opaque(malloc(128)));
  }
  reuse_page_for_32_byte_blocks(p);
  return free_again_and_report(p);
}
