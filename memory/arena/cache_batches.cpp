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
    const std::uint32_t n =
        run->take_many(info, out + taken, static_cast<std::uint32_t>(wanted - taken));
    taken += n;
    bin.regions_in_use += n;
    bin.free_regions -= n;
    bin.nmalloc += n;
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

namespace {

[[noreturn, gnu::noinline]] void flush_refused(void* p, BadPointer problem) {
  fatal("free(", p, "): ",
        problem == BadPointer::kDoubleFreeSmall ? "double free of a small region"
                                                : "not a live small region any more",
        " (found when the thread cache gave it back to its arena: its run was changed "
        "while the region sat in the cache)");
}

}  // namespace

// Regions of one run that follow each other in the batch (a cache's stack
// holds them in the order the program freed them, often run by run) are given
// back together: the run's header is checked once, for the first, and the
// bin's counters and its container are updated once, for the run's whole
// group, with the change the group made (full to non-full, non-full to empty),
// as single frees would have left them.
void Arena::flush_batch(void* const* regions, std::size_t count) {
  LockGuard guard(lock);
  take_remote_frees();
  std::size_t i = 0;
  while (i < count) {
    void* p = regions[i];
    const PointerClass first = classify(Chunk::of(p), p);
    if (first.problem != BadPointer::kNone || first.run == nullptr)
      flush_refused(
          p, first.problem != BadPointer::kNone ? first.problem : BadPointer::kInteriorLarge);
    Run* run = first.run;
    const BinInfo& info = *first.info;
    const bool was_full = run->free_count == 0;
    if (!run->give(first.region)) flush_refused(p, BadPointer::kDoubleFreeSmall);
    std::uint32_t given = 1;
    // The group: the next regions inside the same run. Its header was
    // checked for the first; each region's start is checked here.
    const auto run_bits = reinterpret_cast<std::uintptr_t>(run);
    const std::uintptr_t reg0 = run_bits + info.reg0_offset;
    const std::uintptr_t end = run_bits + info.run_bytes();
    for (++i; i < count; ++i) {
      const auto address = reinterpret_cast<std::uintptr_t>(regions[i]);
      if (address < reg0 || address >= end) break;
      if (!info.is_region_start(address - reg0))
        flush_refused(regions[i], BadPointer::kInteriorSmall);
      const std::uint32_t region = info.region_index(address - reg0);
      if (!run->give(region)) flush_refused(regions[i], BadPointer::kDoubleFreeSmall);
      ++given;
    }
    regions_given(*run->bin, run, was_full, given);
  }
}

}  // namespace runsel
