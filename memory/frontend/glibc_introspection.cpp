// glibc's heap introspection calls (mallinfo2, mallinfo, malloc_stats,
// malloc_info, malloc_trim, mallopt), answered with runsel's own figures, so
// that a program asking them learns about the heap that serves it rather than
// glibc's unused one. Every figure comes from runsel_stats; memory/README.md's
// "glibc's introspection calls" says which field holds what.
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#include <algorithm>
#include <cstring>

#include "frontend/thread_cache.h"
#include "platform/fatal.h"
#include "platform/os.h"
#include "runsel.h"

#define RUNSEL_EXPORT extern "C" __attribute__((visibility("default")))

namespace runsel {
namespace {

// runsel's identity split the glibc way: arena (committed) = uordblks (in
// use by the program or by runsel) + fordblks (free and reusable).
struct Split {
  size_t arena, in_use, free_bytes;
};

Split split(const runsel_stats_t& s) {
  return {s.committed, s.allocated + s.waste + s.bookkeeping, s.dirty + s.bin_unused};
}

size_t runs_with_free_regions(const runsel_stats_t& s) {
  size_t runs = 0;
  for (const runsel_bin_stats& bin : s.bins) runs += bin.nonfull_runs + bin.empty_runs;
  return runs;
}

int clamp(size_t value) { return value > INT_MAX ? INT_MAX : static_cast<int>(value); }

}  // namespace
}  // namespace runsel

using namespace runsel;

RUNSEL_EXPORT struct mallinfo2 mallinfo2(void) noexcept {
  runsel_stats_t s;
  runsel_stats(&s);
  const Split parts = split(s);
  struct mallinfo2 info;
  std::memset(&info, 0, sizeof(info));
  info.arena = parts.arena;
  info.ordblks = runs_with_free_regions(s);
  info.hblks = s.huge_count;
  info.hblkhd = s.huge_allocated;
  info.fsmblks = s.bin_unused;
  info.uordblks = parts.in_use;
  info.fordblks = parts.free_bytes;
  info.keepcost = s.dirty;
  return info;
}

RUNSEL_EXPORT struct mallinfo mallinfo(void) noexcept {
  const struct mallinfo2 wide = mallinfo2();
  struct mallinfo info;
  std::memset(&info, 0, sizeof(info));
  info.arena = clamp(wide.arena);
  info.ordblks = clamp(wide.ordblks);
  info.hblks = clamp(wide.hblks);
  info.hblkhd = clamp(wide.hblkhd);
  info.fsmblks = clamp(wide.fsmblks);
  info.uordblks = clamp(wide.uordblks);
  info.fordblks = clamp(wide.fordblks);
  info.keepcost = clamp(wide.keepcost);
  return info;
}

// Gives back what runsel holds for reuse: the calling thread's cache (with
// -Dthread_cache=true; a program that trims expects the memory it freed
// back), every bin's kept empty run, every dirty page, the huge mapping
// cache. 1 if committed memory went down.
RUNSEL_EXPORT int malloc_trim(size_t) noexcept {
  runsel_stats_t before, after;
  runsel_stats(&before);
#if RUNSEL_THREAD_CACHE
  thread_cache::flush_own();  // first: the runs it empties are then purged too
#endif
  runsel_free_dirty_pages();
  runsel_stats(&after);
  return after.committed < before.committed ? 1 : 0;
}

// runsel has none of glibc's tunables (its own: RUNSEL_CONF and the other
// environment variables of memory/README.md), so every parameter is refused,
// as glibc refuses an unknown one.
RUNSEL_EXPORT int mallopt(int, int) noexcept { return 0; }

// glibc's layout on stderr (totals only), then runsel's identity terms.
RUNSEL_EXPORT void malloc_stats(void) noexcept {
  runsel_stats_t s;
  runsel_stats(&s);
  const Split parts = split(s);
  char text[768];
  const int n = snprintf(
      text, sizeof(text),
      "runsel (%s): %zu arenas\n"
      "system bytes     = %10zu\n"
      "in use bytes     = %10zu\n"
      "Total (incl. mmap):\n"
      "system bytes     = %10zu\n"
      "in use bytes     = %10zu\n"
      "max mmap regions = %10zu\n"
      "max mmap bytes   = %10zu\n"
      "committed %zu = allocated %zu + waste %zu + dirty %zu + bookkeeping %zu + bin_unused %zu\n",
      runsel_variant(), s.narenas, parts.arena - s.huge_allocated, parts.in_use - s.huge_allocated,
      parts.arena, parts.in_use, s.huge_count, s.huge_allocated, s.committed, s.allocated, s.waste,
      s.dirty, s.bookkeeping, s.bin_unused);
  if (n > 0) write_text(2, text, std::min(static_cast<size_t>(n), sizeof(text) - 1));
}

// runsel's stats as XML: the identity terms, then one element per size class.
RUNSEL_EXPORT int malloc_info(int options, FILE* out) noexcept {
  if (options != 0) {
    errno = EINVAL;
    return -1;
  }
  runsel_stats_t s;
  runsel_stats(&s);
  fprintf(out, "<malloc version=\"runsel-1\" variant=\"%s\">\n", runsel_variant());
  const struct {
    const char* name;
    size_t bytes;
  } totals[] = {{"mapped", s.mapped},         {"committed", s.committed},
                {"allocated", s.allocated},   {"waste", s.waste},
                {"dirty", s.dirty},           {"bookkeeping", s.bookkeeping},
                {"bin_unused", s.bin_unused}, {"huge_allocated", s.huge_allocated}};
  for (const auto& total : totals)
    fprintf(out, "<total type=\"%s\" size=\"%zu\"/>\n", total.name, total.bytes);
  fprintf(out, "<arenas count=\"%zu\"/>\n<huge count=\"%zu\"/>\n<bins>\n", s.narenas, s.huge_count);
  for (size_t b = 0; b < s.bin_count; ++b) {
    const runsel_bin_stats& bin = s.bins[b];
    fprintf(out,
            "<bin size=\"%zu\" runs=\"%zu\" nonfull_runs=\"%zu\" empty_runs=\"%zu\" "
            "regions_in_use=\"%zu\" unused_bytes=\"%zu\"/>\n",
            bin.size, bin.runs, bin.nonfull_runs, bin.empty_runs, bin.regions_in_use,
            bin.unused_bytes);
  }
  fprintf(out, "</bins>\n</malloc>\n");
  return 0;
}
