// Bad input, listed: every misuse runsel is tested against and what it does.
// The rows below are the README's bad-input table (RUNSEL_BAD_INPUT_TABLE=<path>
// writes it as Markdown); each row is run as its own test.
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

namespace {

using runsel_test::kChunk;
using runsel_test::opaque;

constexpr size_t kSmall = 64, kLarge = 64 * 1024, kHuge = 3 * kChunk;
constexpr size_t kTooBig = size_t{PTRDIFF_MAX} + 1;

// ---- Misuses that abort: run in a forked child, which names the pointer
// it is about to pass before doing so.

int g_pointer_pipe = -1;
void* announce(void* p) {
  char text[32];
  int n = snprintf(text, sizeof text, "%p", p);
  if (write(g_pointer_pipe, text, n) != n) _exit(3);
  return opaque(p);
}

void double_free(size_t size) {
  void* keep = opaque(malloc(size));  // keeps the run/chunk alive
  void* p = opaque(malloc(size));
  free(p);
  free(announce(p));
  free(keep);
}
void double_free_small() { double_free(kSmall); }
void double_free_large() { double_free(kLarge); }
void double_free_huge() { double_free(kHuge); }
void double_free_after_purge() {
  void* keep = opaque(malloc(kLarge));
  void* p = opaque(malloc(kLarge));
  free(p);
  runsel_free_dirty_pages();  // its pages are now clean, maybe coalesced
  free(announce(p));
  free(keep);
}
// A small block alone in a new run: of the largest size class nobody uses yet.
char* alone_in_a_run() {
  runsel_stats_t stats;
  runsel_stats(&stats);
  for (int b = static_cast<int>(stats.bin_count) - 1; b >= 0; --b)
    if (stats.bins[b].runs == 0) return static_cast<char*>(opaque(malloc(stats.bins[b].size)));
  _exit(4);  // every class in use: the row cannot be set up
}
// Before emptied runs stayed in their bin, the run's pages went straight back
// to the arena, a run of 16-byte regions took them, and the second free freed
// whichever live 16-byte block sat at p.
void double_free_after_run_emptied() {
  char* p = alone_in_a_run();
  free(p);
  for (int i = 0; i < 20000 && opaque(malloc(16)) != p; ++i) {
  }
  free(announce(p));
}
void double_free_after_trim() {
  char* p = alone_in_a_run();
  free(p);
  malloc_trim(0);  // the emptied run goes back to the arena
  free(announce(p));
}
// p's page, given back by malloc_trim, is never used again by another size
// class (its pages keep their class): 100,000 blocks of each of five other
// classes do not land on it, and the second free finds the page free.
// (tests/hardening/reported_double_free.cpp runs the class changes users
// reported, as a plain program.)
void double_free_after_reuse() {
  char* p = alone_in_a_run();
  free(p);
  malloc_trim(0);
  const uintptr_t page = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
  for (size_t size : {32, 112, 144, 176, 208}) {
    for (int i = 0; i < 100000; ++i) {
      char* q = static_cast<char*>(opaque(malloc(size)));
      if ((reinterpret_cast<uintptr_t>(q) & ~uintptr_t{4095}) == page) _exit(5);
    }
  }
  free(announce(p));
}
// The 64 huge allocations freed after p push it out of runsel's memory of
// recent huge frees.
void double_free_huge_after_64_others() {
  std::vector<void*> others;
  for (int i = 0; i < 64; ++i) others.push_back(opaque(malloc(kHuge)));
  void* p = opaque(malloc(kHuge));
  free(p);
  for (void* q : others) free(q);
  free(announce(p));
}
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

// ---- Misuses that are refused or tolerated: checked in-process; each
// returns "" or what went wrong.

std::string expect_enomem(void* p, const char* call) {
  int e = errno;
  free(p);
  if (p != nullptr) return std::string(call) + " returned a block";
  if (e != ENOMEM) return std::string(call) + ": errno " + std::to_string(e) + ", want ENOMEM";
  return "";
}
std::string expect_einval(void* p, const char* call) {
  int e = errno;
  free(p);
  if (p != nullptr) return std::string(call) + " returned a block";
  if (e != EINVAL) return std::string(call) + ": errno " + std::to_string(e) + ", want EINVAL";
  return "";
}

std::string huge_sizes() {
  for (size_t size : {kTooBig, SIZE_MAX, SIZE_MAX - 4095}) {
    errno = 0;
    std::string why = expect_enomem(opaque(malloc(size)), "malloc");
    if (why.empty()) why = expect_enomem(opaque(realloc(nullptr, size)), "realloc(NULL)");
    if (why.empty()) why = expect_enomem(opaque(valloc(size)), "valloc");
    if (why.empty()) why = expect_enomem(opaque(pvalloc(size)), "pvalloc");
    if (why.empty()) why = expect_enomem(opaque(aligned_alloc(64, size)), "aligned_alloc");
    if (!why.empty()) return why + " of " + std::to_string(size);
  }
  return "";
}
std::string calloc_overflow() {
  const size_t cases[][2] = {{SIZE_MAX / 2 + 1, 2}, {2, SIZE_MAX / 2 + 1},
                             {SIZE_MAX, SIZE_MAX},  {size_t{1} << 32, size_t{1} << 32},
                             {1, kTooBig},          {kTooBig / 2 + 1, 2}};
  for (const auto& c : cases) {
    errno = 0;
    std::string why = expect_enomem(opaque(calloc(c[0], c[1])), "calloc");
    if (!why.empty()) return why + " (" + std::to_string(c[0]) + " x " + std::to_string(c[1]) + ")";
  }
  return "";
}
// The old block is untouched by a refused realloc/reallocarray.
std::string refused_resize(bool array) {
  for (size_t size : {kSmall, kLarge, kHuge}) {
    unsigned char* p = static_cast<unsigned char*>(malloc(size));
    memset(p, 0x5C, size);
    errno = 0;
    void* q = array ? reallocarray(p, SIZE_MAX / 2 + 1, 2) : realloc(p, kTooBig);
    std::string why = expect_enomem(opaque(q), array ? "reallocarray" : "realloc");
    for (size_t i = 0; why.empty() && i < size; ++i)
      if (p[i] != 0x5C) why = "old block changed at byte " + std::to_string(i);
    if (why.empty() && malloc_usable_size(p) < size) why = "old block lost";
    free(p);
    if (!why.empty()) return why + " (block of " + std::to_string(size) + ")";
  }
  return "";
}
std::string realloc_overflow() { return refused_resize(false); }
std::string reallocarray_overflow() { return refused_resize(true); }
std::string bad_alignment() {
  for (size_t alignment :
       {size_t{0}, size_t{3}, size_t{24}, size_t{4097}, size_t{PTRDIFF_MAX}, SIZE_MAX}) {
    void* sentinel = reinterpret_cast<void*>(uintptr_t{0x1234});
    void* p = sentinel;
    errno = 0;
    int result = posix_memalign(&p, alignment, 64);
    if (result != EINVAL || p != sentinel || errno != 0)
      return "posix_memalign(" + std::to_string(alignment) + ") returned " +
             std::to_string(result) + " (want EINVAL, *result and errno untouched)";
    errno = 0;
    std::string why = expect_einval(opaque(aligned_alloc(alignment, 64)), "aligned_alloc");
    if (why.empty()) errno = 0, why = expect_einval(opaque(memalign(alignment, 64)), "memalign");
    if (!why.empty()) return why + " with alignment " + std::to_string(alignment);
  }
  // posix_memalign also wants a multiple of sizeof(void*).
  void* p = nullptr;
  if (int result = posix_memalign(&p, sizeof(void*) / 2, 64); result != EINVAL)
    return "posix_memalign(" + std::to_string(sizeof(void*) / 2) + ") returned " +
           std::to_string(result);
  return "";
}
std::string absurd_alignment() {
  for (size_t shift : {47, 52, 62, 63}) {
    size_t alignment = size_t{1} << shift;
    void* p = nullptr;
    int result = posix_memalign(&p, alignment, 64);
    if (result != ENOMEM) {
      if (result == 0) free(p);
      return "posix_memalign(2^" + std::to_string(shift) + ") returned " + std::to_string(result);
    }
    errno = 0;
    std::string why = expect_enomem(opaque(aligned_alloc(alignment, 64)), "aligned_alloc");
    if (why.empty()) errno = 0, why = expect_enomem(opaque(memalign(alignment, 64)), "memalign");
    if (!why.empty()) return why + " with alignment 2^" + std::to_string(shift);
  }
  return "";
}
std::string null_and_zero() {
  free(nullptr);
  if (malloc_usable_size(nullptr) != 0) return "malloc_usable_size(NULL) != 0";
  void* a = malloc(0);
  void* b = malloc(0);
  if (!a || !b || a == b) return "malloc(0) must give distinct blocks";
  if (malloc_usable_size(a) != 16) return "malloc(0) is not a 16-byte region";
  void* c = realloc(a, 0);  // a minimal block, like mozjemalloc; not a free
  if (c == nullptr || malloc_usable_size(c) != 16) return "realloc(p, 0) did not keep a block";
  free(c);
  free(b);
  return "";
}
std::string usable_size_of_bad_pointers() {
  char on_stack[32];
  void* glibc = __libc_malloc(64);
  std::string sizes;
  bool all_zero = true;
  auto probe = [&](const void* p) {
    size_t size = malloc_usable_size(opaque(const_cast<void*>(p)));
    sizes += std::to_string(size) + " ";
    all_zero &= size == 0;
  };
  probe(on_stack);
  probe(glibc);
  __libc_free(glibc);
  for (size_t size : {kSmall, kLarge, kHuge}) {
    void* keep = malloc(size);
    char* p = static_cast<char*>(malloc(size));
    probe(p + (size == kSmall ? 16 : 4096));  // interior
    free(p);
    probe(p);  // freed
    free(keep);
  }
  if (!all_zero) return "malloc_usable_size of bad pointers: " + sizes;
  return "";
}

// A call that succeeds leaves errno as it found it, on every path: C code
// sets errno = 0 and checks it afterwards. The huge in-place growth is made
// to fail (a mapping sits right after the block) so that realloc moves.
std::string errno_after_success() {
  constexpr int kSentinel = 12345;
  std::string why;
  auto kept = [&](void* p, const char* what) {
    if (p == nullptr && why.empty()) why = std::string(what) + " failed";
    if (errno != kSentinel && why.empty())
      why = std::string(what) + " succeeded and set errno to " + std::to_string(errno);
    errno = kSentinel;
    return p;
  };
  errno = kSentinel;
  for (size_t n : {size_t{1}, size_t{100}, size_t{3840}, size_t{5000}, size_t{300000}, kHuge}) {
    free(kept(opaque(malloc(n)), "malloc"));
    free(kept(opaque(calloc(1, n)), "calloc"));
    free(kept(opaque(aligned_alloc(64, n)), "aligned_alloc"));
    free(kept(opaque(memalign(8192, n)), "memalign"));
    free(kept(opaque(valloc(n)), "valloc"));
    free(kept(opaque(pvalloc(n)), "pvalloc"));
    void* p = nullptr;
    if (posix_memalign(&p, 256, n) != 0) return "posix_memalign failed";
    free(kept(p, "posix_memalign"));
  }
  // realloc: small in place and moving, large in place and moving, huge in
  // place (grow, shrink) and moving, and back down to small.
  void* p = kept(opaque(malloc(20)), "malloc");
  p = kept(opaque(realloc(p, 30)), "realloc small in place");
  p = kept(opaque(realloc(p, 300)), "realloc small moving");
  p = kept(opaque(realloc(p, 5000)), "realloc small to large");
  p = kept(opaque(realloc(p, 9000)), "realloc large grow");
  p = kept(opaque(realloc(p, 6000)), "realloc large shrink");
  void* neighbour = opaque(malloc(8 * 4096));  // may block growth in place
  p = kept(opaque(realloc(p, 600000)), "realloc large grow or move");
  free(neighbour);
  p = kept(opaque(realloc(p, kHuge)), "realloc large to huge");
  p = kept(opaque(realloc(p, kHuge + 5000)), "realloc huge grow");
  p = kept(opaque(realloc(p, 2 * kChunk)), "realloc huge shrink");
  char* end = static_cast<char*>(p) + 2 * kChunk;
  void* blocker =
      mmap(end, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (blocker != end) return "could not map right after the huge block";
  errno = kSentinel;
  void* moved = kept(opaque(realloc(p, 8 * kChunk)), "realloc huge moving");
  if (moved == p && why.empty()) why = "the mapping after the block did not force a move";
  munmap(blocker, 4096);
  p = kept(opaque(reallocarray(moved, 100, 10)), "reallocarray huge to small");
  if (malloc_usable_size(p) != 1024 && why.empty()) why = "reallocarray gave a wrong size";
  kept(p, "malloc_usable_size");
  free(p);
  kept(p, "free");
  return why;
}

// calloc zeroes the whole usable size, like glibc, not only the bytes asked
// for: a program may use what malloc_usable_size reports.
std::string calloc_whole_block() {
  for (size_t n : {size_t{17}, size_t{250}, size_t{1000}, size_t{3700}, size_t{5000}}) {
    void* dirty = opaque(malloc(n));
    size_t usable = malloc_usable_size(dirty);
    memset(dirty, 0xA5, usable);
    free(dirty);
    auto* z = static_cast<unsigned char*>(opaque(calloc(1, n)));
    if (z != dirty) return "calloc(" + std::to_string(n) + ") did not reuse the dirty block";
    for (size_t i = 0; i < usable; ++i)
      if (z[i] != 0) return "byte " + std::to_string(i) + " of calloc(" + std::to_string(n) + ")";
    free(z);
  }
  return "";
}

// A one-byte heap overflow: the byte after a run's last region is the lowest
// byte of the next run's header (its bin pointer). Each of the 256 values is
// written in a child of its own, which then frees a block of that run: every
// value that changes the byte must abort with the one line naming the run;
// the unchanged value (the control) must carry on.
std::string overflow_into_run_header() {
  constexpr size_t kSize = 64;
  runsel_stats_t stats;
  runsel_stats(&stats);
  const runsel_bin_stats& bin = stats.bins[kSize / 16 - 1];
  const size_t reg0_offset = bin.bytes_per_run - bin.regions_per_run * kSize;
  std::vector<char*> blocks;
  for (size_t i = 0; i < 6 * bin.regions_per_run; ++i)
    blocks.push_back(static_cast<char*>(malloc(kSize)));
  char* header = nullptr;  // of a run that directly follows one of our blocks
  char* victim = nullptr;  // that run's first region, ours too
  for (char* b : blocks) {
    if ((reinterpret_cast<uintptr_t>(b + kSize) & 4095) != 0) continue;
    for (char* c : blocks)
      if (c == b + kSize + reg0_offset) header = b + kSize, victim = c;
    if (victim) break;
  }
  std::string why;
  if (!victim) why = "no two adjacent runs of 64-byte regions among our blocks";
  const unsigned char original = victim ? static_cast<unsigned char>(*header) : 0;
  char expected[256];
  snprintf(expected, sizeof expected,
           "runsel: free(%p): heap corruption: the header of run %p is damaged (a write past the "
           "end of the block before it?)\n",
           static_cast<void*>(victim), static_cast<void*>(header));
  for (int value = 0; value < 256 && why.empty(); ++value) {
    const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
      *opaque(header) = static_cast<char>(value);  // the overflow
      free(opaque(victim));
    });
    const int status = child.status;
    const std::string& err = child.err;
    const bool aborted = runsel_test::died_of_abort(status);
    const bool carried_on = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char what[64];
    snprintf(what, sizeof what, "byte 0x%02x (was 0x%02x): ", value, original);
    if (value == original) {
      if (!carried_on || !err.empty()) why = what + std::string("the unchanged header was refused");
    } else if (!aborted || err != expected) {
      why = what + std::string("status ") + std::to_string(status) + ", stderr \"" + err + "\"";
    }
  }
  for (char* b : blocks) free(b);
  return why;
}

// A run header as the allocator lays it out (memory/arena/run.h): the bin
// pointer at offset 0, the 24-byte container hook, the free count and hint,
// then the 32-bit check value at offset 36.
constexpr size_t kRunCheckOffset = 36;

// A header forged for another bin from one leaked header: with a check that
// is linear in the bin pointer (an xor fold), check ^ fold(bin16 ^ bin32)
// relabels a run of 16-byte regions as one of 32-byte regions. The free of a
// block in the forged run must abort naming the run.
std::string forged_run_header() {
  std::vector<char*> small, wider;
  for (int i = 0; i < 2000; ++i) small.push_back(static_cast<char*>(malloc(16)));
  for (int i = 0; i < 2000; ++i) wider.push_back(static_cast<char*>(malloc(32)));
  // Runs of both classes are one page (256 and 128 regions): the header is at the page start.
  char* run16 = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(small[1000]) & ~uintptr_t{4095});
  char* run32 = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(wider[1000]) & ~uintptr_t{4095});
  uint64_t bin16, bin32;
  uint32_t check16;
  memcpy(&bin16, run16, 8);
  memcpy(&bin32, run32, 8);
  memcpy(&check16, run16 + kRunCheckOffset, 4);
  const uint64_t delta = bin16 ^ bin32;
  const uint32_t forged_check = check16 ^ static_cast<uint32_t>(delta ^ (delta >> 32));
  char expected[256];
  snprintf(expected, sizeof expected,
           "runsel: free(%p): heap corruption: the header of run %p is damaged (a write past the "
           "end of the block before it?)\n",
           static_cast<void*>(small[1000]), static_cast<void*>(run16));
  const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
    memcpy(opaque(run16), &bin32, 8);
    memcpy(opaque(run16 + kRunCheckOffset), &forged_check, 4);
    free(opaque(small[1000]));
  });
  std::string why;
  if (!runsel_test::died_of_abort(child.status) || child.err != expected)
    why = "status " + std::to_string(child.status) + ", stderr \"" + child.err + "\"";
  for (char* b : small) free(b);
  for (char* b : wider) free(b);
  return why;
}

// The first word of a chunk header is where a write past the block before
// the chunk lands. Finds a huge block (2 MiB, which fills its mapping) that
// ends where an arena chunk begins: the chunk of a 1,008 KiB large block,
// which takes a chunk of its own. Frees what it allocated when it goes.
struct HugeBlockBeforeAChunk {
  std::vector<void*> keep;
  char* huge = nullptr;
  char* chunk = nullptr;
  char* large = nullptr;  // the block in that chunk
  std::string overflow_message;

  HugeBlockBeforeAChunk() {
    // keep holds (large, huge) pairs; a new block may end right before an
    // earlier chunk, or start a chunk right after an earlier huge block.
    const auto chunk_of = [](void* p) {
      return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) & ~(kChunk - 1));
    };
    const auto adjacent = [&](size_t h, size_t l) {
      if (static_cast<char*>(keep[h]) + 2 * kChunk != chunk_of(keep[l])) return false;
      huge = static_cast<char*>(keep[h]), chunk = chunk_of(keep[l]);
      large = static_cast<char*>(keep[l]);
      return true;
    };
    for (int i = 0; i < 512 && huge == nullptr; ++i) {
      keep.push_back(malloc(1008 * 1024));
      keep.push_back(malloc(2 * kChunk));
      const size_t new_large = keep.size() - 2, new_huge = keep.size() - 1;
      for (size_t j = 0; j < keep.size() && huge == nullptr; j += 2)
        if (!adjacent(new_huge, j)) adjacent(j + 1, new_large);
    }
    char text[256];
    snprintf(text, sizeof text,
             "runsel: free(%p): heap corruption: a write past the end of this huge allocation "
             "damaged the header of the chunk after it\n",
             static_cast<void*>(huge));
    overflow_message = text;
  }
  ~HugeBlockBeforeAChunk() {
    for (void* b : keep) free(b);
  }
  HugeBlockBeforeAChunk(const HugeBlockBeforeAChunk&) = delete;
  HugeBlockBeforeAChunk& operator=(const HugeBlockBeforeAChunk&) = delete;

  // In a child: `value` written at `at`, then the program carries on in the
  // chunk (a large free, small blocks) and frees the huge block. Either it
  // aborts with `expected`, or it exits 0 with the heap walker content.
  // Returns what went wrong, or "".
  std::string change_then_carry_on(char* at, int value, const std::string& expected) const {
    const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
      *opaque(at) = static_cast<char>(value);
      free(opaque(large));
      std::vector<void*> blocks;
      for (int i = 0; i < 300; ++i) blocks.push_back(malloc(16 + i % 2000));
      for (void* b : blocks) free(b);
      free(opaque(huge));
      if (runsel_check() != 0) _exit(7);
    });
    const bool carried_on = WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0;
    if (carried_on && child.err.empty()) return "";
    if (runsel_test::died_of_abort(child.status) && child.err == expected) return "";
    char what[64];
    snprintf(what, sizeof what, "value 0x%02x at %p: ", value, static_cast<void*>(at));
    return what + std::string("status ") + std::to_string(child.status) + ", stderr \"" +
           child.err + "\"";
  }
};

// The byte after a huge block: every value that changes it aborts when the
// huge block is freed, naming it.
std::string overflow_past_huge_block() {
  const HugeBlockBeforeAChunk setup;
  if (setup.huge == nullptr) return "no huge block right before a chunk";
  std::string why;
  const int original = static_cast<unsigned char>(*setup.chunk);
  for (int value = 0; value < 256 && why.empty(); ++value) {
    const bool changed = value != original;
    why = setup.change_then_carry_on(setup.chunk, value, changed ? setup.overflow_message : "");
    if (why.empty() && changed) {
      // A changed byte must not pass unseen: the child must have aborted.
      const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
        *opaque(setup.chunk) = static_cast<char>(value);
        free(opaque(setup.huge));
      });
      if (!runsel_test::died_of_abort(child.status)) why = "an overflow went unseen";
    }
  }
  return why;
}

// Each byte of a chunk header's first word (once the arena pointer), each
// value: the program carries on correct (free never follows that word) or
// aborts with runsel's line.
std::string chunk_header_first_word() {
  const HugeBlockBeforeAChunk setup;
  if (setup.huge == nullptr) return "no huge block right before a chunk";
  std::string why;
  for (int byte = 0; byte < 8 && why.empty(); ++byte)
    for (int value = 0; value < 256 && why.empty(); ++value)
      why = setup.change_then_carry_on(setup.chunk + byte, value, setup.overflow_message);
  return why;
}

// The limit of huge double-free detection, as README states it: once the
// huge mapping cache hands the freed mapping out again, the second free frees
// the new block (nothing can tell the two frees apart).
std::string double_free_huge_after_reuse() {
  char* p = static_cast<char*>(opaque(malloc(kHuge)));
  free(p);
  char* q = static_cast<char*>(opaque(malloc(kHuge)));  // from the cache: the same mapping
  if (q != p) {
    free(q);
    return "the huge cache did not hand out the freed mapping again";
  }
  const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
    free(opaque(p));  // the stale pointer: frees q
    if (malloc_usable_size(opaque(q)) != 0) _exit(8);
  });
  free(q);
  if (!(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) || !child.err.empty())
    return "status " + std::to_string(child.status) + ", stderr \"" + child.err + "\"";
  return "";
}

// ---- The table.

struct Row {
  const char* misuse;
  const char* behaviour;  // Markdown, as in README (aborting rows: made from the message)
  void (*aborts)();       // a misuse that must abort with the one line
  const char* function;   // "runsel: FUNCTION(P): PROBLEM"; null: PROBLEM is the whole line
  const char* problem;
  std::string (*check)();  // or a misuse that is refused or tolerated
};

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {"double free of a small block (64 B)", nullptr, double_free_small, "free",
       "double free of a small region", nullptr},
      {"double free of a large block (64 KiB)", nullptr, double_free_large, "free",
       "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"double free of a huge block (3 MiB)", nullptr, double_free_huge, "free",
       "double free of a huge allocation", nullptr},
      {"double free of a small block whose run emptied, after 20,000 mallocs of 16 bytes",
       nullptr, double_free_after_run_emptied, "free", "double free of a small region", nullptr},
      {"double free of a small block whose emptied run was given back (`malloc_trim`)", nullptr,
       double_free_after_trim, "free",
       "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"double free of a small block whose emptied run was given back (`malloc_trim`), after "
       "100,000 blocks of each of five other size classes (none takes its page)",
       nullptr, double_free_after_reuse, "free",
       "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"double free of a huge block after 64 other huge blocks were freed", nullptr,
       double_free_huge_after_64_others, "free",
       "not allocated by runsel, or a huge allocation freed before (a foreign pointer, or a "
       "double free)",
       nullptr},
      {"double free of a huge block after the huge mapping cache handed its mapping out "
       "again (the next 3 MiB malloc)",
       "not detected: the second free frees the new block (no allocator without quarantine "
       "can tell the two frees apart)",
       nullptr, nullptr, nullptr, double_free_huge_after_reuse},
      {"double free of a large block after its pages were purged", nullptr, double_free_after_purge,
       "free", "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"free of an interior pointer (small, +16)", nullptr, interior_small, "free",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)", nullptr},
      {"free of a misaligned pointer (small, +1)", nullptr, misaligned_small, "free",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)", nullptr},
      {"free of an interior pointer (large, +4096)", nullptr, interior_large, "free",
       "not the start of a large allocation (an interior pointer, or a stale one into "
       "memory reused since)", nullptr},
      {"free of an interior pointer (huge, +1 MiB)", nullptr, interior_huge, "free",
       "not the start of a huge allocation (interior pointer)", nullptr},
      {"`delete[]` of an interior pointer", nullptr, delete_interior, "free",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)", nullptr},
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
      {"realloc of a freed large block", nullptr, realloc_freed_large, "realloc",
       "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"realloc of a freed huge block", nullptr, realloc_freed_huge, "realloc",
       "double free of a huge allocation", nullptr},
      {"realloc of an interior pointer", nullptr, realloc_interior, "realloc",
       "not the start of a small region (an interior pointer, or a stale one into memory "
       "reused since)", nullptr},
      {"realloc of glibc's block", nullptr, realloc_foreign, "realloc",
       "not allocated by runsel (foreign pointer)", nullptr},
      {"`malloc`/`free` in a signal handler that interrupted `malloc`/`free` on the same thread",
       nullptr, signal_handler_reentry, nullptr,
       "runsel: malloc or free re-entered on a thread that is inside the allocator (called from "
       "a signal handler?): aborting instead of deadlocking",
       nullptr},
      {"`malloc`, `realloc(NULL, n)`, `valloc`, `pvalloc`, `aligned_alloc` of n > `PTRDIFF_MAX` "
       "(2^63, `SIZE_MAX`, `SIZE_MAX`−4095)",
       "NULL, `errno = ENOMEM`", nullptr, nullptr, nullptr, huge_sizes},
      {"overflowing `calloc` (e.g. `SIZE_MAX/2+1` × 2, 2^32 × 2^32) or product > `PTRDIFF_MAX`",
       "NULL, `errno = ENOMEM`", nullptr, nullptr, nullptr, calloc_overflow},
      {"`realloc(p, n)` with n > `PTRDIFF_MAX`", "NULL, `errno = ENOMEM`, p untouched and live",
       nullptr, nullptr, nullptr, realloc_overflow},
      {"overflowing `reallocarray(p, SIZE_MAX/2+1, 2)`",
       "NULL, `errno = ENOMEM`, p untouched and live", nullptr, nullptr, nullptr,
       reallocarray_overflow},
      {"alignment 0, 3, 24, 4097, `PTRDIFF_MAX`, `SIZE_MAX` (not a power of two); "
       "`posix_memalign` with 4 (< `sizeof(void*)`)",
       "`posix_memalign` returns `EINVAL` (`*result` and `errno` untouched); `aligned_alloc`, "
       "`memalign`: NULL, `errno = EINVAL`",
       nullptr, nullptr, nullptr, bad_alignment},
      {"absurd power-of-two alignment (2^47, 2^52, 2^62, 2^63)",
       "`posix_memalign` returns `ENOMEM`; `aligned_alloc`, `memalign`: NULL, `errno = ENOMEM`",
       nullptr, nullptr, nullptr, absurd_alignment},
      {"`free(NULL)`, `malloc(0)`, `realloc(p, 0)`",
       "no-op; a distinct 16-byte block; a 16-byte block (like mozjemalloc, not a free)", nullptr,
       nullptr, nullptr, null_and_zero},
      {"`malloc_usable_size` of stack or glibc memory, of an interior pointer or of a freed "
       "block (small, large, huge)",
       "returns 0 (no abort)", nullptr, nullptr, nullptr, usable_size_of_bad_pointers},
      {"a one-byte overflow past a small block into the next run's header, then a free of a "
       "block in that run (each of the 255 values that change the byte)",
       "abort (SIGABRT), one line: `runsel: free(P): heap corruption: the header of run R is "
       "damaged (a write past the end of the block before it?)`, R the run",
       nullptr, nullptr, nullptr, overflow_into_run_header},
      {"a run header forged for another bin from one leaked header (16-byte run relabelled "
       "as 32-byte, its check adjusted by the two bins' xor distance), then a free in that run",
       "abort (SIGABRT), one line: `runsel: free(P): heap corruption: the header of run R is "
       "damaged (a write past the end of the block before it?)`, R the run",
       nullptr, nullptr, nullptr, forged_run_header},
      {"a one-byte overflow past a huge block that fills its mapping, into the header of the "
       "chunk after it (each of the 255 values that change the byte), then the program goes on "
       "and frees the huge block",
       "abort (SIGABRT) at that free, one line: `runsel: free(P): heap corruption: a write past "
       "the end of this huge allocation damaged the header of the chunk after it`",
       nullptr, nullptr, nullptr, overflow_past_huge_block},
      {"any value in any of the 8 bytes of a chunk header's first word (where the arena pointer "
       "was), then frees and allocations in that chunk",
       "carries on correct (`runsel_check` finds the heap intact: the arena comes from the chunk "
       "registry, never from the header), or aborts with the line above if a huge block before "
       "the chunk is freed",
       nullptr, nullptr, nullptr, chunk_header_first_word},
      {"`errno` after a call that succeeds (every allocation call; realloc small, large and "
       "huge, in place and moving, also when growing a huge block in place fails)",
       "unchanged", nullptr, nullptr, nullptr, errno_after_success},
      {"`calloc(1, n)` of a recycled block where the usable size exceeds n",
       "the whole usable size is zero, as `malloc_usable_size` reports it", nullptr, nullptr,
       nullptr, calloc_whole_block},
  };
  return table;
}

std::string behaviour(const Row& row) {
  if (!row.aborts) return row.behaviour;
  if (!row.function) return std::string("abort (SIGABRT), one line: `") + row.problem + "`";
  return std::string("abort (SIGABRT), one line: `runsel: ") + row.function +
         "(P): " + row.problem + "`";
}

std::string markdown_table() {
  std::string text = "| misuse | what runsel does |\n| --- | --- |\n";
  for (const Row& row : rows())
    text += std::string("| ") + row.misuse + " | " + behaviour(row) + " |\n";
  return text;
}

// Runs an aborting row in a child; the child's stderr must be exactly
// "runsel: FUNCTION(P): PROBLEM\n" with P the pointer it announced,
// and the child must die of SIGABRT.
void expect_abort(const Row& row) {
  int pointer_pipe[2];
  ASSERT_EQ(pipe(pointer_pipe), 0);
  const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
    close(pointer_pipe[0]);
    g_pointer_pipe = pointer_pipe[1];
    row.aborts();  // returning means the misuse went unnoticed
  });
  close(pointer_pipe[1]);
  std::string pointer;
  char buffer[64];
  for (ssize_t n; (n = read(pointer_pipe[0], buffer, sizeof buffer)) > 0;) pointer.append(buffer, n);
  close(pointer_pipe[0]);
  const int status = child.status;
  const std::string& err = child.err;
  EXPECT_TRUE(runsel_test::died_of_abort(status)) << "status " << status << ", stderr: " << err;
  if (!row.function) {
    EXPECT_EQ(err, std::string(row.problem) + "\n");
    printf("observed: %s", err.c_str());
    return;
  }
  ASSERT_FALSE(pointer.empty()) << "the child died before the misuse; stderr: " << err;
  EXPECT_EQ(err,
            std::string("runsel: ") + row.function + "(" + pointer + "): " + row.problem + "\n");
  printf("observed: %s", err.c_str());
}

class BadInput : public testing::TestWithParam<size_t> {};

TEST_P(BadInput, DoesWhatTheTableSays) {
  const Row& row = rows()[GetParam()];
  SCOPED_TRACE(row.misuse);
  if (row.aborts) {
    expect_abort(row);
  } else {
    std::string why = row.check();
    EXPECT_EQ(why, "") << behaviour(row);
    EXPECT_EQ(runsel_check(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, BadInput, testing::Range(size_t{0}, rows().size()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           std::string name = "row" + std::to_string(info.param) + "_";
                           for (const char* c = rows()[info.param].misuse; *c && name.size() < 60;
                                ++c)
                             name += isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
                           return name;
                         });

// The README's table, from its header line to the first line that is not a
// table row; empty when the README has no such header.
std::string readme_table(const std::string& readme) {
  const std::string header = "| misuse | what runsel does |\n";
  size_t begin = readme.find(header);
  if (begin == std::string::npos) return "";
  size_t end = begin;
  while (end < readme.size() && readme[end] == '|') {
    size_t line_end = readme.find('\n', end);
    end = line_end == std::string::npos ? readme.size() : line_end + 1;
  }
  return readme.substr(begin, end - begin);
}

// README lists every misuse tried, as this table, and nothing else: its table
// (written by hand or pasted) must be this one row for row.
// RUNSEL_BAD_INPUT_TABLE=<path> writes the table to paste there when a row changes.
TEST(BadInputTable, ReadmeHasTheTable) {
  std::string table = markdown_table();
  if (const char* path = getenv("RUNSEL_BAD_INPUT_TABLE")) {
    std::ofstream(path) << table;
  }
  std::ifstream readme(std::string(RUNSEL_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme) << RUNSEL_SOURCE_DIR "/README.md";
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_EQ(readme_table(text.str()), table)
      << "README.md's bad-input table is not the tested one; regenerate it with "
         "RUNSEL_BAD_INPUT_TABLE=<path> and paste it in";
}

TEST(BadInput, RunsOnTheExpectedVariant) { EXPECT_TRUE(runsel_test::RunsExpectedVariant()); }

}  // namespace
