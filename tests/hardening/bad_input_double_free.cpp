// Bad input: double frees, small, large and huge, right away and after the
// run, its pages or the huge mapping went elsewhere.
#include "bad_input.h"

namespace bad_input {
namespace {

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
// (A thread cache would keep p: runsel_thread_cache_flush gives it back to
// its run first, a no-op without the cache.)
void double_free_after_run_emptied() {
  char* p = alone_in_a_run();
  free(p);
  runsel_thread_cache_flush();
  for (int i = 0; i < 20000 && opaque(malloc(16)) != p; ++i) {
  }
  free(announce(p));
}
void double_free_after_trim() {
  char* p = alone_in_a_run();
  free(p);
  runsel_thread_cache_flush();  // p back to its run, which empties
  malloc_trim(0);               // the emptied run goes back to the arena
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
  runsel_thread_cache_flush();  // p back to its run, which empties
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

// The limit of huge double-free detection, as memory/README.md states it: once the
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

}  // namespace

std::vector<Row> double_free_rows() {
  return {
      {"double free of a small block (64 B)", nullptr, double_free_small, "free",
       "double free of a small region", nullptr},
      {"double free of a large block (64 KiB)", nullptr, double_free_large, "free",
       "double free: nothing is allocated at this address any more (its page is free)", nullptr},
      {"double free of a huge block (3 MiB)", nullptr, double_free_huge, "free",
       "double free of a huge allocation", nullptr},
      {"double free of a small block whose run emptied, after 20,000 mallocs of 16 bytes", nullptr,
       double_free_after_run_emptied, "free", "double free of a small region", nullptr},
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
       "free", "double free: nothing is allocated at this address any more (its page is free)",
       nullptr},
  };
}

}  // namespace bad_input
