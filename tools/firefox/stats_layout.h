// The figures firefox-esr's mozjemalloc reports through its exported
// jemalloc_stats_internal(stats, bins), as the recorder and the reference
// replayer read them, and the check that this Firefox lays them out so: the
// layout is not a stable interface, so a Firefox whose fields do not hold the
// known constants (quantum 16, chunk 1 MiB, page 4 KiB, 1 to MAX_BINS bins) and
// plausible figures (1 to 4095 arenas, allocated and bin_unused within mapped) is
// treated as having no usable figures.
#ifndef RUNSEL_FIREFOX_STATS_LAYOUT_H
#define RUNSEL_FIREFOX_STATS_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_BINS 64
#define MARKS_FILE_SIZE 65536  // tools/trace/format.md: count at 0, labels from 64

// jemalloc_stats_t of Firefox 153 (176 bytes): three flags, then size_t fields.
struct moz_stats {
  bool opt_junk, opt_randomize_small, opt_zero;
  size_t narenas, quantum, quantum_max, quantum_wide, quantum_wide_max, subpage_max, large_max,
      chunksize, page_size, real_page_size, dirty_max;
  size_t mapped, allocated, waste, pages_dirty, pages_fresh, pages_madvised, bookkeeping,
      bin_unused, num_operations, arena_run_header;
  size_t spare[8];  // room for a later Firefox's extra fields: never read
};

// jemalloc_bin_stats_t: one per small size class.
struct moz_bin_stats {
  size_t size, num_non_full_runs, num_runs, bytes_unused, bytes_total, bytes_per_run,
      regions_per_run;
};

typedef void (*jemalloc_stats_fn)(struct moz_stats*, struct moz_bin_stats*);
typedef size_t (*num_bins_fn)(void);

// Whether stats read from this Firefox look like the layout above.
static inline bool stats_layout_matches(const struct moz_stats* s, size_t bins) {
  return bins > 0 && bins <= MAX_BINS && s->quantum == 16 && s->chunksize == (1u << 20) &&
         s->page_size == 4096 && s->narenas >= 1 && s->narenas < 4096 &&
         s->allocated <= s->mapped && s->bin_unused <= s->mapped;
}

// committed as about:memory derives it: every committed byte is one of these.
static inline size_t stats_committed(const struct moz_stats* s) {
  return s->allocated + s->waste + s->pages_dirty + s->bookkeeping + s->bin_unused;
}

// `, "stats": {...}, "bins": [[size, runs, non_full_runs, unused, total, bytes_per_run,
// regions_per_run], ...]` appended to a JSON object; returns the characters written.
static inline int format_stats_json(char* out, size_t room, const struct moz_stats* s,
                                    const struct moz_bin_stats* bins, size_t count) {
  int n = snprintf(out, room,
                   ", \"stats\": {\"narenas\": %zu, \"mapped\": %zu, \"committed\": %zu, "
                   "\"allocated\": %zu, \"waste\": %zu, \"dirty\": %zu, \"fresh\": %zu, "
                   "\"madvised\": %zu, \"bookkeeping\": %zu, \"bin_unused\": %zu, "
                   "\"num_operations\": %zu, \"randomize_small\": %s}, \"bins\": [",
                   s->narenas, s->mapped, stats_committed(s), s->allocated, s->waste,
                   s->pages_dirty, s->pages_fresh, s->pages_madvised, s->bookkeeping, s->bin_unused,
                   s->num_operations, s->opt_randomize_small ? "true" : "false");
  for (size_t i = 0; i < count && n > 0 && (size_t)n < room; ++i) {
    const struct moz_bin_stats* b = &bins[i];
    n += snprintf(out + n, room - (size_t)n, "%s[%zu, %zu, %zu, %zu, %zu, %zu, %zu]", i ? ", " : "",
                  b->size, b->num_runs, b->num_non_full_runs, b->bytes_unused, b->bytes_total,
                  b->bytes_per_run, b->regions_per_run);
  }
  if (n > 0 && (size_t)n < room) n += snprintf(out + n, room - (size_t)n, "]");
  return n;
}

#endif
