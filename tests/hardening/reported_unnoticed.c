// Misuses reported as going unnoticed, run as users met them: a plain C
// program (no runsel headers, nothing of runsel's linked, no C++ runtime,
// whose start-up would allocate before the program's constructor) that the
// test runs under LD_PRELOAD of each library. Before its misuse it prints
// "misuse of 0x..." on stdout, naming the pointer runsel must name. Reaching
// the end means the misuse went unnoticed: it then says whether a later
// malloc handed out a block that is still live (two owners) and exits 0.
//
//   reported_unnoticed remote_then_own_free   p freed by a thread that has not
//        allocated (queued for p's arena), then by the owner: its free must
//        not cache p and hand it out again
//   reported_unnoticed remote_then_realloc    the same, then realloc(p, 40)
//   reported_unnoticed remote_then_usable     the same, then malloc_usable_size(p):
//        prints "usable N" and exits 0 (0 is right: p is free)
//   reported_unnoticed overflow_into_queued   b queued with its link to x;
//        strcpy of 16 characters into a, the 16-byte block just below b, writes
//        its NUL into b's first byte; with a plain link that byte turns x into
//        y = x & ~0xff, a live block, which the queue's take-in then frees
//   reported_unnoticed atfork                 a pthread_atfork handler that
//        allocates, registered from a constructor before any malloc; fork, the
//        child allocates and exits 0: prints "forked; child exited 0"
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// The misuse is the point of this program.
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static void* opaque(void* p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

enum { kMaxHeld = 4096 };
static void* g_held[kMaxHeld];  // static: the program's own bookkeeping allocates nothing
static int g_held_count = 0;

static void* hold(size_t size) {
  void* p = opaque(malloc(size));
  if (g_held_count < kMaxHeld) g_held[g_held_count++] = p;
  return p;
}

static void forget(const void* q) {
  for (int i = 0; i < g_held_count; ++i)
    if (g_held[i] == q) g_held[i] = NULL;
}

static int is_held(const void* q) {
  for (int i = 0; i < g_held_count; ++i)
    if (g_held[i] == q) return 1;
  return 0;
}

// Every line goes out through write(2) from a stack buffer: stdio's buffer
// would be a malloc, and one under the arena's lock takes in the remote frees
// a scenario needs left queued.
__attribute__((format(printf, 1, 2))) static void say(const char* format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  const int n = vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (n > 0 && write(1, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) _exit(5);
}

static void announce(const void* p) { say("misuse of %p\n", p); }

// Allocates `count` blocks of `size` and reports whether one of them is a
// block the program still holds: the misuse went unnoticed either way.
static int report_unnoticed(size_t size, int count) {
  int twice = 0;
  for (int i = 0; i < count; ++i) {
    void* q = opaque(malloc(size));
    twice = twice || is_held(q);
  }
  say("unnoticed; later mallocs gave %s\n",
      twice ? "a block that is still live (two owners)" : "free blocks");
  return 0;
}

// Frees `blocks[0..count)` from a new thread that has not allocated: each
// free is another arena's (or no arena's) remote free, queued for the owner.
struct FreeList {
  void** blocks;
  int count;
};

static void* free_them(void* arg) {
  const struct FreeList* list = arg;
  for (int i = 0; i < list->count; ++i) free(list->blocks[i]);
  return NULL;
}

static int free_from_a_thread(void** blocks, int count) {
  struct FreeList list = {blocks, count};
  pthread_t thread;
  if (pthread_create(&thread, NULL, free_them, &list) != 0) return 0;
  pthread_join(thread, NULL);
  return 1;
}

// p, a 48-byte block, freed by another thread; its run keeps a live block.
static void* remotely_freed_block(void) {
  hold(48);
  void* p = opaque(malloc(48));
  hold(48);
  if (!free_from_a_thread(&p, 1)) exit(3);
  return p;
}

static int remote_then_own_free(void) {
  void* p = remotely_freed_block();
  announce(p);
  free(opaque(p));
  hold(48);
  hold(48);
  // Fills and flushes enough to take the queue in.
  for (int i = 0; i < 400; ++i) free(opaque(malloc(48)));
  return report_unnoticed(48, 400);
}

static int remote_then_realloc(void) {
  void* p = remotely_freed_block();
  announce(p);
  void* q = opaque(realloc(p, 40));
  if (g_held_count < kMaxHeld) g_held[g_held_count++] = q;
  return report_unnoticed(48, 400);
}

static int remote_then_usable(void) {
  void* p = remotely_freed_block();
  announce(p);
  say("usable %zu\n", malloc_usable_size(p));
  return 0;
}

// 16-byte blocks in one fresh run: a and b next to each other, x a block
// whose address has a low byte other than 0 with y = x & ~0xff a live block
// (neither a nor b). The thread frees x, then b (b's link: x); the overflow
// writes 0 into b's first byte (0xff where that byte is 0 already).
static int overflow_into_queued(void) {
  enum { kBlocks = 512 };
  static void* blocks[kBlocks];
  for (int i = 0; i < kBlocks; ++i) blocks[i] = hold(16);
  void *a = NULL, *b = NULL, *x = NULL;
  for (int i = 0; i + 1 < kBlocks && b == NULL; ++i) {
    if ((char*)blocks[i + 1] == (char*)blocks[i] + 16 && ((uintptr_t)blocks[i + 1] & 0xff) != 0) {
      a = blocks[i];
      b = blocks[i + 1];
    }
  }
  for (int i = 0; i < kBlocks && x == NULL && b != NULL; ++i) {
    void* y = (void*)((uintptr_t)blocks[i] & ~(uintptr_t)0xff);
    if (blocks[i] != y && blocks[i] != a && blocks[i] != b && y != a && y != b && is_held(y))
      x = blocks[i];
  }
  if (b == NULL || x == NULL) {
    say("no layout for the overflow\n");
    return 3;
  }
  void* queued[2] = {x, b};
  if (!free_from_a_thread(queued, 2)) return 3;
  forget(x);
  forget(b);
  announce(b);
  // 17 bytes into a 16-byte block. The terminating 0 changes b's first byte
  // unless that byte is 0 already (then the overflow's last byte is 0xff).
  if (*(volatile unsigned char*)b != 0) {
    strcpy(opaque(a), "0123456789abcdef");
  } else {
    memcpy(opaque(a), "0123456789abcdef\xff", 17);
  }
  malloc_trim(0);  // takes every arena's queue in
  return report_unnoticed(16, 2000);
}

static int g_handler_blocks = 0;

static void allocate_in_handler(void) {
  void* p = opaque(malloc(100));
  g_handler_blocks += p != NULL;
  free(p);
}

// glibc passes the program's arguments to its constructors.
__attribute__((constructor)) static void register_early(int argc, char** argv, char** envp) {
  (void)envp;
  if (argc > 1 && strcmp(argv[1], "atfork") == 0)
    pthread_atfork(allocate_in_handler, allocate_in_handler, allocate_in_handler);
}

static int atfork(void) {
  hold(64);
  const pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    void* p = opaque(malloc(200));
    _exit(p != NULL && g_handler_blocks == 2 ? 0 : 4);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 3;
  say("forked; child exited %d; handlers allocated %d times in the parent\n",
      WIFEXITED(status) ? WEXITSTATUS(status) : -1, g_handler_blocks);
  return 0;
}

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "";
  if (strcmp(scenario, "remote_then_own_free") == 0) return remote_then_own_free();
  if (strcmp(scenario, "remote_then_realloc") == 0) return remote_then_realloc();
  if (strcmp(scenario, "remote_then_usable") == 0) return remote_then_usable();
  if (strcmp(scenario, "overflow_into_queued") == 0) return overflow_into_queued();
  if (strcmp(scenario, "atfork") == 0) return atfork();
  fprintf(stderr,
          "usage: %s remote_then_own_free|remote_then_realloc|remote_then_usable|"
          "overflow_into_queued|atfork\n",
          argv[0]);
  return 2;
}
