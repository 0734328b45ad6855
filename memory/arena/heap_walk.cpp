// Arena figures two ways: from the counters kept on the hot paths, and
// recomputed by walking every chunk's page map, every run's bitmap and every
// bin's container. Tests and checked builds compare the two.
#include <cstdio>

#include "arena/arena.h"
#include "platform/os.h"
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
    const BinInfo& info = kBinInfo[i];
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

namespace {

void report(const char* what, unsigned arena, std::size_t counted, std::size_t walked) {
  char line[256];
  int n = std::snprintf(line, sizeof(line),
                        "runsel: check: arena %u: %s: counters say %zu, walk finds %zu\n", arena,
                        what, counted, walked);
  if (n > 0) os::write_all(2, line, static_cast<std::size_t>(n));
}

}  // namespace

bool Arena::walk_and_compare() const {
  runsel_stats_t walked{};
  std::size_t bin_runs_in_set[kNumBins] = {};
  std::size_t free_run_heads = 0;
  bool ok = true;

  for (Chunk* chunk = chunks_.front(); chunk != nullptr; chunk = ChunkList::next(chunk)) {
    ++walked.chunks;
    walked.mapped += kChunkSize;
    walked.committed += kChunkHeaderPages * kPageSize;
    walked.bookkeeping += kChunkHeaderPages * kPageSize;
    std::size_t chunk_dirty = 0, chunk_allocated = 0, chunk_kept = 0;
    for (std::size_t i = kFirstUsablePage; i < kPagesPerChunk;) {
      const PageMapEntry& entry = chunk->map[i];
      if (!entry.allocated()) {  // a free run: size at both ends, per-page dirty bits
        const std::size_t pages = entry.size_pages();
        if (pages == 0 || i + pages > kPagesPerChunk ||
            chunk->map[i + pages - 1].size_pages() != pages) {
          report("free run boundary sizes", index_, pages, 0);
          return false;
        }
        if (!chunk->spare) ++free_run_heads;
        for (std::size_t j = i; j < i + pages; ++j) {
          if (chunk->map[j].allocated()) {
            report("allocated page inside a free run (page, run's first page)", index_, j, i);
            ok = false;
          }
          if (chunk->map[j].class_tag() != entry.class_tag()) {
            report("class tag differs inside a free run (page, run's first page)", index_, j, i);
            ok = false;
          }
          if (chunk->map[j].dirty()) ++chunk_dirty;
        }
        // Free neighbours are coalesced unless their class tags differ.
        if (i + pages < kPagesPerChunk && !chunk->map[i + pages].allocated() &&
            chunk->map[i + pages].class_tag() == entry.class_tag()) {
          report("free runs of one class tag not coalesced (page, run's first page)", index_,
                 i + pages, i);
          ok = false;
        }
        i += pages;
      } else if (entry.bits & kLarge) {
        const std::size_t pages = entry.size_pages();
        if (pages == 0 || i + pages > kPagesPerChunk) {
          report("large run head", index_, pages, 0);
          return false;
        }
        walked.large_allocated += pages * kPageSize;
        chunk_allocated += pages;
        walked.committed += pages * kPageSize;
        i += pages;
      } else {
        Run* run = reinterpret_cast<Run*>(entry.bits & ~kPageMask);
        if (reinterpret_cast<char*>(run) != const_cast<Chunk*>(chunk)->page_address(i)) {
          report("small run head", index_, i, 0);
          return false;
        }
        if (!run_header_intact(run)) {
          report("run header check (heap corruption)", index_, i, 0);
          return false;
        }
        const std::size_t bin_index = index_of_bin(*run->bin);
        const BinInfo& info = kBinInfo[bin_index];
        std::size_t free_regions = 0;
        for (std::uint32_t w = 0; w < info.bitmap_words; ++w) {
          free_regions += static_cast<std::size_t>(__builtin_popcountll(run->bitmap()[w]));
        }
        if (free_regions != run->free_count) {
          report("run free count vs bitmap", index_, run->free_count, free_regions);
          ok = false;
        }
        if (free_regions == info.nregs) {
          // an empty run is its bin's kept one, outside the set
          ++walked.bins[bin_index].empty_runs;
          chunk_kept += info.run_pages;
          if (run != bins_[bin_index].empty_run) {
            report("empty run that is not its bin's kept one", index_, bin_index, 0);
            ok = false;
          }
        } else if (free_regions != 0) {  // full runs are outside the set
          ++bin_runs_in_set[bin_index];
        }
        chunk_allocated += info.run_pages;
        walked.committed += info.run_bytes();
        walked.bookkeeping += info.header_bytes;
        walked.waste += info.tail_bytes;
        walked.small_allocated += (info.nregs - free_regions) * info.size;
        walked.bin_unused += free_regions * info.size;
        ++walked.bins[bin_index].runs;
        walked.bins[bin_index].regions_in_use += info.nregs - free_regions;
        for (std::size_t j = i; j < i + info.run_pages; ++j) {
          if ((chunk->map[j].bits & ~kPageMask) != reinterpret_cast<std::uintptr_t>(run)) {
            report("small run page not naming its run (page, run's first page)", index_, j, i);
            ok = false;
          }
        }
        i += info.run_pages;
      }
    }
    if (chunk_dirty != chunk->ndirty) {
      report("chunk dirty pages", index_, chunk->ndirty, chunk_dirty);
      ok = false;
    }
    if (chunk_allocated != chunk->allocated_pages || chunk_kept != chunk->kept_pages) {
      report("chunk allocated pages", index_, chunk->allocated_pages, chunk_allocated);
      report("chunk kept-run pages", index_, chunk->kept_pages, chunk_kept);
      ok = false;
    }
    if (chunk_kept != 0 && chunk_allocated == chunk_kept) {
      report("chunk held by kept empty runs alone", index_, chunk_kept, chunk_allocated);
      ok = false;
    }
    if ((chunk->ndirty != 0) != chunk->in_dirty_list) {
      report("chunk in the dirty list (1 = yes) vs having dirty pages", index_,
             chunk->in_dirty_list ? 1 : 0, chunk->ndirty != 0 ? 1 : 0);
      ok = false;
    }
    // Nothing allocated and not a spare: kept for its pages' class tags.
    if (chunk_allocated == 0 && !chunk->spare) ++walked.idle_chunks;
    if (chunk->idle != (chunk_allocated == 0 && !chunk->spare)) {
      report("chunk marked idle (1 = yes) vs nothing allocated outside the spares", index_,
             chunk->idle ? 1 : 0, chunk_allocated == 0 && !chunk->spare ? 1 : 0);
      ok = false;
    }
    walked.dirty += chunk_dirty * kPageSize;
    walked.committed += chunk_dirty * kPageSize;
  }
  walked.allocated = walked.small_allocated + walked.large_allocated;

  runsel_stats_t counted{};
  add_figures(&counted);
  auto compare = [&](const char* what, std::size_t c, std::size_t w) {
    if (c != w) {
      report(what, index_, c, w);
      ok = false;
    }
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
  std::size_t in_trees = 0;
  for (const auto& tree : free_runs_) {
    in_trees += tree.size();
    const char* why = nullptr;
    if (!tree.check(&why)) {
      report(why, index_, 0, 0);
      ok = false;
    }
    for (PageMapEntry* e = tree.first(); e != nullptr; e = tree.next(e)) {
      if (&tree - free_runs_ != static_cast<std::ptrdiff_t>(e->class_tag() >> kClassTagShift)) {
        report("free run in the best-fit tree of another class tag", index_, 0, 0);
        ok = false;
      }
    }
  }
  compare("free runs in the best-fit trees", in_trees, free_run_heads);
  const char* why = nullptr;
  for (std::size_t b = 0; b < kNumBins; ++b) {
    compare("bin runs", counted.bins[b].runs, walked.bins[b].runs);
    compare("bin regions in use", counted.bins[b].regions_in_use, walked.bins[b].regions_in_use);
    compare("bin non-full runs", bins_[b].nonfull.size(), bin_runs_in_set[b]);
    compare("bin kept empty runs", counted.bins[b].empty_runs, walked.bins[b].empty_runs);
    if (!bins_[b].nonfull.check(&why)) {
      report(why, index_, b, 0);
      ok = false;
    }
  }
  return ok;
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
