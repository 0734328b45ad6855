/* malloc_bench's pair loops as a plain C program, for instruction counts under
 * callgrind (pair_instructions.py): BM_pair_ring (a ring of 64 live blocks of
 * one size; each iteration frees a seeded slot and allocates its replacement)
 * and BM_pair_immediate (malloc, then free at once). Before the loop, a
 * ballast of 2,000 mixed-size blocks, every third freed, so that no chunk is
 * idle. `noop` runs the same loop with malloc and free replaced by functions
 * that do nothing: its count is the loop's own, subtracted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void* volatile sink;
static void* noop_malloc(size_t n) {
  static char b[64];
  (void)n;
  return b;
}
static void noop_free(void* p) { (void)p; }
/* callgrind counts this function and what it calls (--toggle-collect). */
__attribute__((noinline)) void measured_loop(int mode, int noop, size_t size, long iters) {
  void* (*m)(size_t) = noop ? noop_malloc : malloc;
  void (*f)(void*) = noop ? noop_free : free;
  void* ring[64];
  uint64_t lcg = 0x52494e47;
  if (mode == 0) {
    for (int i = 0; i < 64; i++) ring[i] = m(size);
    for (long i = 0; i < iters; i++) {
      lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
      unsigned slot = (unsigned)(lcg >> 58);
      f(ring[slot]);
      ring[slot] = m(size);
    }
    for (int i = 0; i < 64; i++) f(ring[i]);
  } else {
    for (long i = 0; i < iters; i++) {
      void* p = m(size);
      sink = p;
      f(p);
    }
  }
}
int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: pairloop ring|imm SIZE ITERS noop|real\n");
    return 2;
  }
  int mode = strcmp(argv[1], "ring") == 0 ? 0 : 1;
  size_t size = strtoul(argv[2], 0, 10);
  long iters = strtol(argv[3], 0, 10);
  int noop = strcmp(argv[4], "noop") == 0;
  /* ballast: 2,000 blocks of mixed sizes, every third freed, so no chunk is idle */
  static void* ballast[2000];
  for (int i = 0; i < 2000; i++) ballast[i] = malloc(16 + (size_t)(i * 37 % 3000));
  for (int i = 0; i < 2000; i += 3) free(ballast[i]);
  measured_loop(mode, noop, size, iters);
  return 0;
}
