// Arena figures two ways: from the counters kept on the hot paths, and
// recomputed by walking every chunk's page map, every run's bitmap and every
// bin's container. Tests and checked builds compare the two.
#include "arena/arena.h"
#include "platform/fatal.h"
#include "runsel.h"

namespace runsel {

namespace {

// A bin's pick counters (zero unless counting) into its runsel_bin_stats.
void add_counts(const PickCounts& counts, runsel_bin_stats* bin) {
  bin->picks += counts.picks;
  bin->picks_with_choice += counts.picks_with_choice;
  bin->runs_created += counts.runs_created;
  bin->runs_destroyed += counts.runs_destroyed;
  for (std::size_t i = 0; i < RUNSEL_PICK_BUCKETS; ++i)
    bin->nonfull_at_pick[i] += counts.nonfull_at_pick[i];
  for (std::size_t i = 0; i < RUNSEL_FULLNESS_BUCKETS; ++i)
    bin->picked_fullness[i] += counts.picked_fullness[i];
}

}  // namespace

void Arena::add_figures(runsel_stats_t* f) const {
  f->chunks += chunk_count_;
  f->idle_chunks += idle_chunks_;
  f->mapped += chunk_count_ * kChunkSize;
  f->committed += committed_pages_ * kPageSize;
  f->dirty += dirty_pages_ * kPageSize;
  f->large_allocated += large_allocated_;
  f->allocated += large_allocated_;
  f->bookkeeping += chunk_count_ * kChunkHeaderPages * kPageSize;
  f->nmalloc += large_nmalloc_;
  f->nfree += large_nfree_;
  f->purges += purges_;
  for (std::size_t i = 0; i < kNumBins; ++i) {
    const Bin& bin = bins_[i];
    const BinInfo& info = bin_info(i);
    f->small_allocated += bin.regions_in_use * info.size;
    f->allocated += bin.regions_in_use * info.size;
    f->waste += bin.run_count * info.tail_bytes;
    f->bookkeeping += bin.run_count * info.header_bytes;
    f->bin_unused += bin.free_regions * info.size;
    f->nmalloc += bin.nmalloc;
    f->nfree += bin.nfree;
    f->bins[i].runs += bin.run_count;
    f->bins[i].nonfull_runs += bin.nonfull.size();
    f->bins[i].empty_runs += bin.empty_run != nullptr;
    f->bins[i].regions_in_use += bin.regions_in_use;
    f->bins[i].unused_bytes += bin.free_regions * info.size;
    add_counts(bin.counters, &f->bins[i]);
  }
}

// The walk of one arena, page map by page map, then its sums against the
// counters. Each difference is one line on stderr naming what the walk found
// there (the chunk, page, run or bin and the values that disagree).
struct ArenaWalker {
  const Arena& arena;
  runsel_stats_t walked{};
  std::size_t bin_runs_in_set[kNumBins] = {};
  std::size_t free_run_heads = 0;
  bool ok = true;

  template <class... Parts>
  void fail(const Parts&... parts) {
    message("check: arena ", arena.index_, ": ", parts...);
    ok = false;
  }
  static const char* yes_no(bool value) { return value ? "yes" : "no"; }

  // Each walks the run starting at page `i` and returns its length in pages,
  // or 0 when the page map is too damaged to go on in this chunk.
  std::size_t free_run(Chunk* chunk, std::size_t i, std::size_t* dirty) RUNSEL_REQUIRES(arena.lock);
  std::size_t large_run(Chunk* chunk, std::size_t i, std::size_t* allocated)
      RUNSEL_REQUIRES(arena.lock);
  std::size_t small_run(Chunk* chunk, std::size_t i, std::size_t* allocated, std::size_t* kept)
      RUNSEL_REQUIRES(arena.lock);
  bool chunk_pages(Chunk* chunk) RUNSEL_REQUIRES(arena.lock);
  void compare_with_counters() RUNSEL_REQUIRES(arena.lock);
  void free_run_trees() RUNSEL_REQUIRES(arena.lock);
  void bins(const runsel_stats_t& counted) RUNSEL_REQUIRES(arena.lock);
};

// A free run: its size at both ends, the same class tag on every page,
// dirty bits counted, and no free neighbour it should have been coalesced with.
std::size_t ArenaWalker::free_run(Chunk* chunk, std::size_t i, std::size_t* dirty) {
  const PageMapEntry& entry = chunk->map[i];
  const std::size_t pages = entry.size_pages();
  if (pages == 0 || i + pages > kPagesPerChunk) {
    fail("chunk ", chunk, ", page ", i, ": a free run of ", pages,
         " pages (zero or past the chunk's end)");
    return 0;
  }
  if (chunk->map[i + pages - 1].size_pages() != pages) {
    fail("chunk ", chunk, ", page ", i, ": a free run of ", pages, " pages whose last page (",
         i + pages - 1, ") says ", chunk->map[i + pages - 1].size_pages());
    return 0;
  }
  if (!chunk->spare) ++free_run_heads;
  for (std::size_t j = i; j < i + pages; ++j) {
    if (chunk->map[j].allocated()) {
      fail("chunk ", chunk, ", page ", j, ": allocated, inside the free run at page ", i);
    }
    if (chunk->map[j].class_tag() != entry.class_tag()) {
      fail("chunk ", chunk, ", page ", j, ": class tag ",
           chunk->map[j].class_tag() >> kClassTagShift, " inside the free run at page ", i,
           " tagged ", entry.class_tag() >> kClassTagShift);
    }
    if (chunk->map[j].dirty()) ++*dirty;
  }
  // Free neighbours are coalesced unless their class tags differ.
  if (i + pages < kPagesPerChunk && !chunk->map[i + pages].allocated() &&
      chunk->map[i + pages].class_tag() == entry.class_tag()) {
    fail("chunk ", chunk, ", pages ", i, " and ", i + pages,
         ": neighbouring free runs of class tag ", entry.class_tag() >> kClassTagShift,
         " not coalesced");
  }
  return pages;
}

std::size_t ArenaWalker::large_run(Chunk* chunk, std::size_t i, std::size_t* allocated) {
  const std::size_t pages = chunk->map[i].size_pages();
  if (pages == 0 || i + pages > kPagesPerChunk) {
    fail("chunk ", chunk, ", page ", i, ": a large allocation of ", pages,
         " pages (zero, a tail page without its head, or past the chunk's end)");
    return 0;
  }
  walked.large_allocated += pages * kPageSize;
  walked.committed += pages * kPageSize;
  *allocated += pages;
  return pages;
}

// A small run: its header intact, its free count equal to its bitmap's, every
// page naming it; an empty run must be its bin's kept one.
std::size_t ArenaWalker::small_run(Chunk* chunk, std::size_t i, std::size_t* allocated,
                                   std::size_t* kept) {
  Run* run = reinterpret_cast<Run*>(chunk->map[i].bits & ~kPageMask);
  if (reinterpret_cast<char*>(run) != chunk->page_address(i)) {
    fail("chunk ", chunk, ", page ", i, ": the first page of a small run names run ", run,
         " instead of itself");
    return 0;
  }
  if (!arena.run_header_intact(run)) {
    fail("run ", run, ": its header fails its check (heap corruption)");
    return 0;
  }
  const std::size_t bin_index = arena.index_of_bin(*run->bin);
  const BinInfo& info = bin_info(bin_index);
  std::size_t free_regions = 0;
  for (std::uint32_t w = 0; w < info.bitmap_words; ++w) {
    free_regions += static_cast<std::size_t>(__builtin_popcountll(run->bitmap()[w]));
  }
  if (free_regions != run->free_count) {
    fail("run ", run, " (bin ", bin_index, "): free count ", run->free_count,
         ", but its bitmap has ", free_regions, " free regions");
  }
  if (free_regions == info.nregs) {  // an empty run is its bin's kept one, outside the set
    ++walked.bins[bin_index].empty_runs;
    *kept += info.run_pages;
    if (run != arena.bins_[bin_index].empty_run) {
      fail("run ", run, " (bin ", bin_index, "): empty, but the bin keeps run ",
           static_cast<const void*>(arena.bins_[bin_index].empty_run));
    }
  } else if (free_regions != 0) {  // full runs are outside the set
    ++bin_runs_in_set[bin_index];
  }
  *allocated += info.run_pages;
  walked.committed += info.run_bytes();
  walked.bookkeeping += info.header_bytes;
  walked.waste += info.tail_bytes;
  walked.small_allocated += (info.nregs - free_regions) * info.size;
  walked.bin_unused += free_regions * info.size;
  ++walked.bins[bin_index].runs;
  walked.bins[bin_index].regions_in_use += info.nregs - free_regions;
  for (std::size_t j = i; j < i + info.run_pages; ++j) {
    const std::uintptr_t named = chunk->map[j].bits & ~kPageMask;
    if (named != reinterpret_cast<std::uintptr_t>(run)) {
      fail("chunk ", chunk, ", page ", j, ": names ", reinterpret_cast<const void*>(named),
           ", inside run ", run, " (pages ", i, " to ", i + info.run_pages - 1, ")");
    }
    if (chunk->map[j].class_tag() != class_tag_of_bin(bin_index)) {
      fail("chunk ", chunk, ", page ", j, " of run ", run, " (bin ", bin_index, "): class tag ",
           chunk->map[j].class_tag() >> kClassTagShift, " instead of ",
           class_tag_of_bin(bin_index) >> kClassTagShift);
    }
  }
  return info.run_pages;
}

// One chunk's page map, then its own counts (dirty, allocated and kept pages,
// its lists and flags) against what the map says; false if the map is too
// damaged to walk.
bool ArenaWalker::chunk_pages(Chunk* chunk) {
  std::size_t dirty = 0, allocated = 0, kept = 0;
  for (std::size_t i = kFirstUsablePage; i < kPagesPerChunk;) {
    const PageMapEntry& entry = chunk->map[i];
    const std::size_t pages = !entry.allocated()      ? free_run(chunk, i, &dirty)
                              : (entry.bits & kLarge) ? large_run(chunk, i, &allocated)
                                                      : small_run(chunk, i, &allocated, &kept);
    if (pages == 0) return false;
    i += pages;
  }
  if (dirty != chunk->ndirty) {
    fail("chunk ", chunk, ": counts ", chunk->ndirty, " dirty pages, its page map has ", dirty);
  }
  if (allocated != chunk->allocated_pages || kept != chunk->kept_pages) {
    fail("chunk ", chunk, ": counts ", chunk->allocated_pages, " allocated pages (",
         chunk->kept_pages, " of them in kept empty runs), its page map has ", allocated, " (",
         kept, ")");
  }
  if (kept != 0 && allocated == kept) {
    fail("chunk ", chunk, ": held by kept empty runs alone (", kept, " pages)");
  }
  if ((chunk->ndirty != 0) != chunk->in_dirty_list) {
    fail("chunk ", chunk, ": in the dirty list: ", yes_no(chunk->in_dirty_list), ", but it counts ",
         chunk->ndirty, " dirty pages");
  }
  // Nothing allocated and not a spare: kept for its pages' class tags.
  const bool idle = allocated == 0 && !chunk->spare;
  if (idle) ++walked.idle_chunks;
  if (chunk->idle != idle) {
    fail("chunk ", chunk, ": marked idle: ", yes_no(chunk->idle), ", but it has ", allocated,
         " allocated pages (spare: ", yes_no(chunk->spare), ")");
  }
  walked.dirty += dirty * kPageSize;
  walked.committed += dirty * kPageSize;
  return true;
}

void ArenaWalker::compare_with_counters() {
  runsel_stats_t counted{};
  arena.add_figures(&counted);
  walked.allocated = walked.small_allocated + walked.large_allocated;
  auto compare = [&](const char* what, std::size_t c, std::size_t w) {
    if (c != w) fail(what, ": counters say ", c, ", the walk finds ", w);
  };
  compare("chunks", counted.chunks, walked.chunks);
  compare("idle chunks", counted.idle_chunks, walked.idle_chunks);
  compare("mapped", counted.mapped, walked.mapped);
  compare("committed", counted.committed, walked.committed);
  compare("allocated", counted.allocated, walked.allocated);
  compare("large allocated", counted.large_allocated, walked.large_allocated);
  compare("waste", counted.waste, walked.waste);
  compare("dirty", counted.dirty, walked.dirty);
  compare("bookkeeping", counted.bookkeeping, walked.bookkeeping);
  compare("bin_unused", counted.bin_unused, walked.bin_unused);
  free_run_trees();
  bins(counted);
}

// Each best-fit tree holds only free runs of its own class tag, and together
// they hold the first page of every free run outside the spare chunks.
void ArenaWalker::free_run_trees() {
  std::size_t in_trees = 0;
  for (std::size_t tag = 0; tag < kNumBins + 1; ++tag) {
    const auto& tree = arena.free_runs_[tag];
    in_trees += tree.size();
    const char* why = nullptr;
    if (!tree.check(&why)) fail("the best-fit tree of class tag ", tag, ": ", why);
    for (PageMapEntry* e = tree.first(); e != nullptr; e = tree.next(e)) {
      if (e->class_tag() >> kClassTagShift != tag) {
        fail("a free run tagged ", e->class_tag() >> kClassTagShift,
             " in the best-fit tree of class tag ", tag);
      }
    }
  }
  if (in_trees != free_run_heads) {
    fail("the best-fit trees hold ", in_trees, " free runs, the page maps have ", free_run_heads);
  }
}

void ArenaWalker::bins(const runsel_stats_t& counted) {
  for (std::size_t b = 0; b < kNumBins; ++b) {
    auto compare = [&](const char* what, std::size_t c, std::size_t w) {
      if (c != w)
        fail("bin ", b, " (", bin_info(b).size, " bytes): ", what, ": counters say ", c,
             ", the walk finds ", w);
    };
    compare("runs", counted.bins[b].runs, walked.bins[b].runs);
    compare("regions in use", counted.bins[b].regions_in_use, walked.bins[b].regions_in_use);
    compare("non-full runs", arena.bins_[b].nonfull.size(), bin_runs_in_set[b]);
    compare("kept empty runs", counted.bins[b].empty_runs, walked.bins[b].empty_runs);
    const char* why = nullptr;
    if (!arena.bins_[b].nonfull.check(&why)) {
      fail("bin ", b, " (", bin_info(b).size, " bytes): its non-full runs: ", why);
    }
  }
}

bool Arena::walk_and_compare() const {
  ArenaWalker walk{*this};
  walk.arena.lock.assert_held();  // the analysis cannot see that walk.arena is *this
  for (std::size_t i = 0; i < kNumBins; ++i) {
    const TaggedClass& tagged = tagged_classes_[i];
    if (tagged.bin != &bins_[i] || tagged.reg0_offset != bin_info(i).reg0_offset ||
        tagged.reciprocal != bin_info(i).reciprocal ||
        tagged.reciprocal_low != static_cast<std::uint32_t>(bin_info(i).reciprocal)) {
      walk.fail("bin ", i, "'s entry in the table of the cached free's check is wrong");
    }
  }
  for (Chunk* chunk = chunks_.front(); chunk != nullptr; chunk = ChunkList::next(chunk)) {
    ++walk.walked.chunks;
    walk.walked.mapped += kChunkSize;
    walk.walked.committed += kChunkHeaderPages * kPageSize;
    walk.walked.bookkeeping += kChunkHeaderPages * kPageSize;
    if (!walk.chunk_pages(chunk)) return false;
  }
  walk.compare_with_counters();
  return walk.ok;
}

std::size_t Arena::chunk_maps(runsel_chunk_map* out, std::size_t capacity) const {
  static_assert(RUNSEL_PAGES_PER_CHUNK == kPagesPerChunk);
  std::size_t count = 0;
  for (Chunk* chunk = chunks_.front(); chunk != nullptr; chunk = ChunkList::next(chunk), ++count) {
    if (count >= capacity) continue;
    runsel_chunk_map& map = out[count];
    map.address = reinterpret_cast<std::size_t>(chunk);
    map.arena = index_;
    for (std::size_t i = 0; i < kPagesPerChunk; ++i) {
      const std::uintptr_t bits = chunk->map[i].bits;
      unsigned char code;
      if (bits & kReserved) {
        code = RUNSEL_PAGE_RESERVED;
      } else if (!(bits & kAllocated)) {
        code = (bits & kDirty) ? RUNSEL_PAGE_DIRTY : RUNSEL_PAGE_FREE;
      } else if (bits & kLarge) {
        code = RUNSEL_PAGE_LARGE;
      } else {
        Run* run = reinterpret_cast<Run*>(bits & ~kPageMask);
        if (!run_header_intact(run)) {
          map.pages[i] = RUNSEL_PAGE_RESERVED;  // unreadable: a damaged header
          continue;
        }
        const BinInfo& info = info_of(*run->bin);
        code = static_cast<unsigned char>(RUNSEL_PAGE_SMALL +
                                          (100 * (info.nregs - run->free_count)) / info.nregs);
      }
      map.pages[i] = code;
    }
  }
  return count;
}

}  // namespace runsel
