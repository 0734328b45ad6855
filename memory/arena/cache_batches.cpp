// The thread cache's two batch operations on an arena (frontend/thread_cache.h):
// a fill takes many regions of one bin, and a flush frees many regions, each
// under one acquisition of the lock. Both go through the same seam as single
// calls (small_paths.h), so the bins and their containers see fewer, larger
// operations but keep every invariant of run.h.
#include "arena/small_paths.h"
#include "platform/fatal.h"

namespace runsel {

std::size_t Arena::fill_batch(std::size_t bin_index, void** out, std::size_t wanted) {
  const BinInfo& info = bin_info(bin_index);
  LockGuard guard(lock);
  take_remote_frees();
  Bin& bin = bins_[bin_index];
  std::size_t taken = 0;
  while (taken < wanted) {
    Run* run = pick_run(bin);
    bin.counters.pick(bin.nonfull.size(), run ? run->free_count : 0, info.nregs);
    const bool fresh = run == nullptr;
    if (fresh) {
      run = take_kept_run(bin);
      if (run == nullptr) run = new_small_run(bin_index);
      if (run == nullptr) break;
    }
    do {
      out[taken++] = run->take(info);
      ++bin.regions_in_use;
      --bin.free_regions;
      ++bin.nmalloc;
    } while (taken < wanted && run->free_count > 0);
    // The seam, as after single allocations: a fresh run joins the container
    // unless it filled at once; a member leaves it when it fills.
    if (fresh) {
      if (run->free_count > 0) insert_run(bin, run);
    } else if (run->free_count == 0) {
      erase_run(bin, run);
    } else {
      touched_run(bin, run);
    }
  }
  return taken;
}

void Arena::flush_batch(void* const* regions, std::size_t count) {
  LockGuard guard(lock);
  take_remote_frees();
  for (std::size_t i = 0; i < count; ++i) {
    void* p = regions[i];
    const PointerClass target = classify(Chunk::of(p), p);
    const BadPointer problem =
        target.problem != BadPointer::kNone || target.run == nullptr
            ? (target.problem != BadPointer::kNone ? target.problem : BadPointer::kInteriorLarge)
            : free_small_locked(target);
    if (problem != BadPointer::kNone) {
      fatal("free(", p, "): ",
            problem == BadPointer::kDoubleFreeSmall ? "double free of a small region"
                                                    : "not a live small region any more",
            " (found when the thread cache gave it back to its arena: its run was changed "
            "while the region sat in the cache)");
    }
  }
}

}  // namespace runsel
