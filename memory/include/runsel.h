/* runsel public C API: the standard allocation functions are exported with C
 * linkage by the library; this header adds runsel's own introspection calls. */
#ifndef RUNSEL_H
#define RUNSEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for every size class of any build: 45 (mozjemalloc's classes), or 48
 * with the 5, 6 and 7 KiB classes (-Dclasses48). runsel_stats_t.bin_count
 * says how many this library fills, so one program works with either. */
#define RUNSEL_MAX_BINS 48
/* Counting builds: buckets of the non-full run count at each pick (0, 1, 2-3,
 * 4-7, ..., the last takes the rest) and of the picked run's fullness (tenths
 * of its regions in use). */
#define RUNSEL_PICK_BUCKETS 16
#define RUNSEL_FULLNESS_BUCKETS 10

typedef struct runsel_bin_stats {
  size_t size;         /* region size of the class */
  size_t runs;         /* runs currently allocated to the bin */
  size_t nonfull_runs; /* runs in the bin's non-full container */
  size_t regions_per_run;
  size_t bytes_per_run; /* run size in bytes (a page multiple) */
  size_t unused_bytes;  /* free regions in the bin's runs x size */
  size_t regions_in_use;
  size_t empty_runs; /* emptied runs kept in the bin (0 or 1 per arena), in runs */
  /* Counting builds only (runsel_stats_t.counting == 1), else 0; cumulative
   * since start. A pick is a small allocation asking the container for a run. */
  size_t picks;
  size_t picks_with_choice; /* picks while the container held 2+ runs */
  size_t runs_created;
  size_t runs_destroyed; /* emptied and given back to the arena */
  size_t nonfull_at_pick[RUNSEL_PICK_BUCKETS];
  size_t picked_fullness[RUNSEL_FULLNESS_BUCKETS]; /* picks that found a run */
} runsel_bin_stats;

/* All figures in bytes. Exact identity, checked by tests:
 *   committed == allocated + waste + dirty + bookkeeping + bin_unused
 * Each term comes from its own counters, never as a remainder. */
typedef struct runsel_stats_t {
  size_t mapped;      /* address space mapped: chunks, huge mappings, metadata */
  size_t committed;   /* pages that may be resident: page maps + huge + metadata */
  size_t allocated;   /* live bytes rounded up to their size class */
  size_t waste;       /* run tails of small runs */
  size_t dirty;       /* free pages not yet purged */
  size_t bookkeeping; /* chunk headers, run headers, internal metadata */
  size_t bin_unused;  /* free regions in small runs x region size */
  size_t small_allocated, large_allocated, huge_allocated;
  size_t narenas;         /* arenas created so far */
  size_t chunks;          /* arena chunks mapped, spare chunks included */
  size_t idle_chunks;     /* of those, chunks with nothing allocated kept mapped because their
                             free pages keep their size class (purged beyond the spares) */
  size_t huge_count;      /* live huge allocations */
  size_t dirty_max;       /* per-arena dirty page budget, in bytes */
  size_t dirty_max_total; /* the process-wide dirty budget, in bytes, once several arenas
                            exist (it then replaces dirty_max); else 0 */
  size_t nmalloc;         /* allocation calls served (all kinds) */
  size_t nfree;           /* frees served (all kinds) */
  size_t purges;          /* madvise purges performed */
  size_t huge_cached;     /* mapped bytes of freed huge mappings kept for reuse */
  size_t huge_dirty;      /* dirty bytes in huge mappings (cached ones, and pages past the
                             usable size of reused ones); part of dirty */
  size_t counting;        /* 1 in a counting build: the bins' pick counters are kept */
  size_t thread_cached;   /* freed blocks runsel holds in caches, in bytes: small regions in
                             thread caches (-Dthread_cache=true; part of small_allocated)
                             and, in the fast profile, the large runs the arenas keep
                             (part of large_allocated); part of allocated (allocated as far
                             as their runs and page maps know); 0 without either */
  size_t bin_count;       /* size classes of this library: bins[0 .. bin_count-1] */
  runsel_bin_stats bins[RUNSEL_MAX_BINS];
} runsel_stats_t;

/* Fills *stats with a consistent snapshot (each arena locked in turn). */
void runsel_stats(runsel_stats_t* stats);

/* The thread cache (-Dthread_cache=true, or a setting-tcache-* library).
 * runsel_thread_cache_flush gives the calling thread's cached regions back to
 * their arenas (the program keeps using the cache), and, in the fast profile,
 * the freed large runs its arena keeps back to the arena's pages. runsel_thread_cache_slots
 * writes up to `capacity` regions of the calling thread's cache of size class
 * `bin` (bins[] of runsel_stats) to out, oldest first, and returns how many it
 * holds: for tests. runsel_thread_cache_bound returns how many that stack may
 * hold now (its bound grows for batches larger than it and shrinks when idle),
 * for tests too. Without the cache: no-ops returning 0. */
void runsel_thread_cache_flush(void);
size_t runsel_thread_cache_slots(size_t bin, void** out, size_t capacity);
size_t runsel_thread_cache_bound(size_t bin);

/* Name of the non-full run container this library was built with. */
const char* runsel_variant(void);

/* The profile this library was built in: "fast" (a thread cache in front of
 * the bins and the 5, 6 and 7 KiB classes: build/libmalloc.so and the
 * installed library by default, -Dprofile=fast, and the
 * libsetting-fast-<container> libraries), "faithful" (neither, mozjemalloc's
 * shape: every libmalloc-<container> variant, which replays and container
 * comparisons run, in the as_built lifecycle of runsel_profile() when they
 * judge a container), or "custom" (one of the two without the other: the
 * libsetting-tcache- and libsetting-classes48- libraries, -Dthread_cache or
 * -Dclasses48 builds). */
const char* runsel_build_profile(void);

/* Usable size malloc(size) would give; 0 when size cannot be served. */
size_t runsel_good_size(size_t size);

/* Purges every arena's dirty pages with madvise(MADV_DONTNEED). */
void runsel_free_dirty_pages(void);

/* The purge policy in force: "budget", "deferred" or "decay" (the build's
 * default, -Dpurge_policy, unless RUNSEL_CONF="purge:NAME" overrides it). */
const char* runsel_purge_policy(void);

/* The profile in force: "as_built" (RUNSEL_CONF=profile:as_built, mozjemalloc's
 * run lifecycle and purge, for replays that judge a container) or "drop_in"
 * (the library's own defaults). */
const char* runsel_profile(void);

/* Runs now what the purge policy has queued, whatever its delay: under
 * "deferred", every arena's queued purge (down to half its budget); under
 * "decay", a decay step in every arena. For a program's idle time. Returns
 * the bytes purged. */
size_t runsel_purge_now(void);

/* Sets the dirty-page budget of the calling thread's arena to `percent` of
 * the configured one (at least one page); returns the new budget in bytes. */
size_t runsel_scale_dirty_budget(unsigned percent);

/* Walks every chunk, run and container, recomputes every stats figure from
 * the page maps and run bitmaps and compares with the counters. Returns 0
 * when consistent; otherwise writes what differs to stderr and returns -1. */
int runsel_check(void);

/* Page occupancy of one arena chunk, for fragmentation pictures. */
#define RUNSEL_PAGES_PER_CHUNK 256
#define RUNSEL_PAGE_RESERVED 0 /* chunk header or guard page */
#define RUNSEL_PAGE_FREE 1     /* free, purged or never touched */
#define RUNSEL_PAGE_DIRTY 2    /* free, still committed */
#define RUNSEL_PAGE_LARGE 3    /* part of a large allocation */
#define RUNSEL_PAGE_SMALL 16   /* small run page: 16 + percent of its regions in use */
typedef struct runsel_chunk_map {
  size_t address;
  unsigned arena;
  unsigned char pages[RUNSEL_PAGES_PER_CHUNK];
} runsel_chunk_map;

/* Fills up to `capacity` maps (arena order, then chunk order within an
 * arena); returns how many chunks exist, which may exceed capacity. */
size_t runsel_chunk_maps(runsel_chunk_map* out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif
