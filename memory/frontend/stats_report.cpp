// runsel_stats, runsel_check, purging on demand, and the JSON stats line
// written at exit when RUNSEL_STATS is set.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "arena/base.h"
#include "arena/huge.h"
#include "frontend/frontend.h"
#include "frontend/thread_cache.h"
#include "platform/fatal.h"
#include "runsel.h"
#include "structures/chunk_registry.h"

namespace runsel {

// runsel.h's stats have room for every size class of any build.
static_assert(RUNSEL_MAX_BINS >= kNumBins, "runsel.h's RUNSEL_MAX_BINS is below kNumBins");

namespace {

// Calls `visit` on every arena created so far, under that arena's lock;
// returns how many arenas it visited. clang's lock analysis does not follow
// the lock into `visit`, so each visit opens with arena->lock.assert_held().
template <typename Visit>
std::size_t for_each_arena_locked(Visit&& visit) {
  const std::size_t count = arena_count();
  for (std::size_t i = 0; i < count; ++i) {
    Arena* arena = arena_at(i);
    LockGuard guard(arena->lock);
    visit(arena);
  }
  return count;
}

void collect(runsel_stats_t* s) {
  std::memset(s, 0, sizeof(*s));
  s->bin_count = kNumBins;
  for (std::size_t b = 0; b < kNumBins; ++b) {
    const BinInfo& info = bin_info(b);
    s->bins[b].size = info.size;
    s->bins[b].regions_per_run = info.nregs;
    s->bins[b].bytes_per_run = info.run_bytes();
  }
  s->narenas = for_each_arena_locked([s](Arena* arena) {
    arena->lock.assert_held();
    arena->take_remote_frees();
    arena->add_figures(s);
    s->thread_cached += arena->cached_large_bytes();  // freed, though allocated to the page map
    s->dirty_max = arena->dirty_max_pages() * kPageSize;
    s->dirty_max_total = arena->process_dirty_max_pages() * kPageSize;
  });
  s->counting = kCounters ? 1 : 0;

  const huge::Figures h = huge::figures();
  s->mapped += h.mapped + h.cached_mapped;
  // A huge mapping commits its resident prefix: the usable pages of a live
  // one, and pages an earlier allocation touched (dirty) in reused or cached ones.
  s->committed += h.allocated + h.dirty;
  s->dirty += h.dirty;
  s->huge_cached = h.cached_mapped;
  s->huge_dirty = h.dirty;
  s->huge_allocated = h.allocated;
  s->huge_count = h.count;
  s->nmalloc += h.nmalloc;
  s->nfree += h.nfree;

  const base::Usage metadata = base::usage();
  const std::size_t registry = ChunkRegistry::mapped_bytes();
  s->mapped += metadata.mapped + registry;
  s->committed += metadata.committed + registry;
  s->bookkeeping += metadata.committed + registry;

  s->allocated = s->small_allocated + s->large_allocated + s->huge_allocated;
#if RUNSEL_THREAD_CACHE
  s->thread_cached += thread_cache::cached_bytes();
#endif
}

// Appends to `out` (bounded) with printf formatting.
struct Writer {
  char* data;
  std::size_t capacity;
  std::size_t length = 0;
  __attribute__((format(printf, 2, 3))) void add(const char* format, ...) {
    if (length >= capacity) return;
    va_list args;
    va_start(args, format);
    int n = std::vsnprintf(data + length, capacity - length, format, args);
    va_end(args);
    if (n > 0) length += static_cast<std::size_t>(n);
    if (length > capacity) length = capacity;
  }
};

// A bin's pick counters, as members of its object (counting builds).
void write_counts(Writer& w, const runsel_bin_stats& bin) {
  w.add(",\"picks\":%zu,\"picks_with_choice\":%zu,\"runs_created\":%zu,\"runs_destroyed\":%zu",
        bin.picks, bin.picks_with_choice, bin.runs_created, bin.runs_destroyed);
  const char* separator = ",\"nonfull_at_pick\":[";
  for (std::size_t count : bin.nonfull_at_pick) {
    w.add("%s%zu", separator, count);
    separator = ",";
  }
  separator = "],\"picked_fullness\":[";
  for (std::size_t count : bin.picked_fullness) {
    w.add("%s%zu", separator, count);
    separator = ",";
  }
  w.add("]");
}

void write_json(int fd, const runsel_stats_t& s) {
  static char buffer[65536];
  Writer w{buffer, sizeof(buffer) - 2};
  w.add(
      "{\"pid\":%ld,\"variant\":\"%s\",\"build_profile\":\"%s\",\"profile\":\"%s\","
      "\"purge\":\"%s\"",
      static_cast<long>(getpid()), kContainerName, runsel_build_profile(), runsel_profile(),
      purge_policy_name(purge_policy()));
  const struct {
    const char* name;
    std::size_t value;
  } fields[] = {
      {"mapped", s.mapped},
      {"committed", s.committed},
      {"allocated", s.allocated},
      {"waste", s.waste},
      {"dirty", s.dirty},
      {"bookkeeping", s.bookkeeping},
      {"bin_unused", s.bin_unused},
      {"small_allocated", s.small_allocated},
      {"large_allocated", s.large_allocated},
      {"huge_allocated", s.huge_allocated},
      {"narenas", s.narenas},
      {"chunks", s.chunks},
      {"idle_chunks", s.idle_chunks},
      {"huge_count", s.huge_count},
      {"dirty_max", s.dirty_max},
      {"dirty_max_total", s.dirty_max_total},
      {"nmalloc", s.nmalloc},
      {"nfree", s.nfree},
      {"purges", s.purges},
      {"huge_cached", s.huge_cached},
      {"thread_cached", s.thread_cached},
      {"huge_dirty", s.huge_dirty},
      {"counting", s.counting},
  };
  for (const auto& field : fields) w.add(",\"%s\":%zu", field.name, field.value);
  w.add(",\"bins\":[");
  for (std::size_t b = 0; b < kNumBins; ++b) {
    const runsel_bin_stats& bin = s.bins[b];
    w.add(
        "%s{\"size\":%zu,\"runs\":%zu,\"nonfull_runs\":%zu,\"empty_runs\":%zu,"
        "\"regions_per_run\":%zu,\"bytes_per_run\":%zu,\"unused_bytes\":%zu,"
        "\"regions_in_use\":%zu",
        b == 0 ? "" : ",", bin.size, bin.runs, bin.nonfull_runs, bin.empty_runs,
        bin.regions_per_run, bin.bytes_per_run, bin.unused_bytes, bin.regions_in_use);
    if (s.counting) write_counts(w, bin);
    w.add("}");
  }
  w.add("]}");
  buffer[w.length++] = '\n';
  write_text(fd, buffer, w.length);
}

// Opens the RUNSEL_STATS destination: "1"/"stderr" is fd 2; otherwise a
// path in which "%p" becomes the process id, opened for appending.
int open_stats_destination(const char* spec) {
  if (std::strcmp(spec, "1") == 0 || std::strcmp(spec, "stderr") == 0) return 2;
  char path[4096];
  std::size_t length = 0;
  for (const char* c = spec; *c != '\0' && length + 24 < sizeof(path); ++c) {
    if (c[0] == '%' && c[1] == 'p') {
      length += static_cast<std::size_t>(
          std::snprintf(path + length, sizeof(path) - length, "%ld", static_cast<long>(getpid())));
      ++c;
    } else {
      path[length++] = *c;
    }
  }
  path[length] = '\0';
  return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

__attribute__((destructor)) void write_stats_at_exit() {
  const char* spec = getenv("RUNSEL_STATS");
  if (spec == nullptr || *spec == '\0') return;
  runsel_stats_t stats;
  collect(&stats);
  int fd = open_stats_destination(spec);
  if (fd < 0) return;
  write_json(fd, stats);
  if (fd != 2) close(fd);
}

}  // namespace
}  // namespace runsel

using namespace runsel;

RUNSEL_EXPORT void runsel_stats(runsel_stats_t* stats) {
  collect(stats);
#if defined(RUNSEL_CHECKED)
  if (runsel_check() != 0) abort();
#endif
}

RUNSEL_EXPORT void runsel_free_dirty_pages(void) {
  for_each_arena_locked([](Arena* arena) {
    arena->lock.assert_held();
    arena->purge_all();
  });
  huge::release_cached(true);
}

RUNSEL_EXPORT size_t runsel_purge_now(void) {
  std::size_t pages = 0;
  for_each_arena_locked([&pages](Arena* arena) {
    arena->lock.assert_held();
    pages += arena->purge_due();
  });
  return pages * kPageSize + huge::release_cached(false);
}

RUNSEL_EXPORT const char* runsel_purge_policy(void) { return purge_policy_name(purge_policy()); }

RUNSEL_EXPORT const char* runsel_profile(void) {
  return as_built_profile() ? "as_built" : "drop_in";
}

RUNSEL_EXPORT size_t runsel_scale_dirty_budget(unsigned percent) {
  Arena* arena = thread_arena();
  if (arena == nullptr) return 0;
  LockGuard guard(arena->lock);
  arena->scale_budget(percent);
  return arena->dirty_max_pages() * kPageSize;
}

RUNSEL_EXPORT int runsel_check(void) {
  bool ok = true;
  for_each_arena_locked([&ok](Arena* arena) {
    arena->lock.assert_held();
    arena->take_remote_frees();
    ok = arena->walk_and_compare() && ok;
  });
  ok = huge::walk_and_compare() && ok;
#if RUNSEL_THREAD_CACHE
  ok = thread_cache::check() && ok;
#endif
  runsel_stats_t s;
  collect(&s);
  if (s.committed != s.allocated + s.waste + s.dirty + s.bookkeeping + s.bin_unused) {
    message("check: committed ", s.committed, " != allocated ", s.allocated, " + waste ", s.waste,
            " + dirty ", s.dirty, " + bookkeeping ", s.bookkeeping, " + bin_unused ", s.bin_unused);
    ok = false;
  }
  return ok ? 0 : -1;
}

RUNSEL_EXPORT void runsel_thread_cache_flush(void) {
#if RUNSEL_THREAD_CACHE
  thread_cache::flush_own();
#endif
  if constexpr (kLargeRunCache) {
    if (Arena* arena = thread_arena()) {
      LockGuard guard(arena->lock);
      arena->release_cached_large_runs();
    }
  }
}

RUNSEL_EXPORT size_t runsel_thread_cache_slots(size_t bin, void** out, size_t capacity) {
#if RUNSEL_THREAD_CACHE
  thread_cache::ThreadCache* cache = thread_cache::t_slot.cache;
  if (cache == nullptr || bin >= kNumBins) return 0;
  const thread_cache::CacheClass& c = cache->classes[bin];
  const std::uint32_t count = c.count();
  for (std::size_t i = 0; i < count && i < capacity; ++i) out[i] = c.slots[i];
  return count;
#else
  (void)bin;
  (void)out;
  (void)capacity;
  return 0;
#endif
}

RUNSEL_EXPORT size_t runsel_thread_cache_bound(size_t bin) {
#if RUNSEL_THREAD_CACHE
  thread_cache::ThreadCache* cache = thread_cache::t_slot.cache;
  if (cache == nullptr || bin >= kNumBins) return 0;
  return cache->classes[bin].capacity();
#else
  (void)bin;
  return 0;
#endif
}

RUNSEL_EXPORT size_t runsel_chunk_maps(runsel_chunk_map* out, size_t capacity) {
  std::size_t total = 0;
  for_each_arena_locked([&](Arena* arena) {
    arena->lock.assert_held();
    arena->take_remote_frees();
    total += arena->chunk_maps(out + (total < capacity ? total : capacity),
                               total < capacity ? capacity - total : 0);
  });
  return total;
}
