// Small allocations: bins, runs and the container seam. The bin is the only
// code that calls insert / erase / pick / touched on its NonFullRuns.
#include <cstdlib>

#include "arena/arena.h"
#include "platform/assert.h"
#include "platform/os.h"

namespace runsel {

void Arena::check_container(const Bin& bin) const {
  if constexpr (kChecked) {
    const char* why = nullptr;
    if (!bin.runs.check(&why)) {
      static const char kMessage[] = "runsel: checked build: run container invariant broken: ";
      os::write_all(2, kMessage, sizeof(kMessage) - 1);
      os::write_all(2, why, __builtin_strlen(why));
      os::write_all(2, "\n", 1);
      abort();
    }
  } else {
    (void)bin;
  }
}

// ---- the seam ----------------------------------------------------------------
// A run is in its bin's container exactly when 0 < free_count < nregs (run.h).
// Each call asserts its side of that, cheaply (the containers assert in their
// own erase() that the run is a member), and the bin identity: the bin's
// regions, in use or free, are exactly its runs' regions.

namespace {
bool bin_identity_holds(const Bin& bin, const BinInfo& info) {
  return bin.regions_in_use + bin.free_regions == bin.run_count * info.nregs;
}
}  // namespace

Run* Arena::pick_run(Bin& bin) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  Run* run = bin.runs.pick();
  RUNSEL_ASSERT(run == nullptr || run->bin == &bin);
  RUNSEL_ASSERT(run == nullptr || (run->free_count > 0 && run->free_count < info_of(bin).nregs));
  return run;
}

void Arena::insert_run(Bin& bin, Run* run) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  RUNSEL_ASSERT(run->bin == &bin);
  RUNSEL_ASSERT(run->free_count > 0 && run->free_count < info_of(bin).nregs);
  bin.runs.insert(run);
  check_container(bin);
}

// `run` has just filled or emptied.
void Arena::erase_run(Bin& bin, Run* run) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  RUNSEL_ASSERT(run->bin == &bin);
  RUNSEL_ASSERT(run->free_count == 0 || run->free_count == info_of(bin).nregs);
  RUNSEL_ASSERT(bin.runs.size() > 0);
  bin.runs.erase(run);
  check_container(bin);
}

// An allocation or a free changed the occupancy of `run`, which stays a member.
void Arena::touched_run(Bin& bin, Run* run) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  RUNSEL_ASSERT(run->bin == &bin);
  RUNSEL_ASSERT(run->free_count > 0 && run->free_count < info_of(bin).nregs);
  bin.runs.touched(run);
  check_container(bin);
}

// ---- runs and regions ----------------------------------------------------------

Run* Arena::new_small_run(std::size_t bin_index) {
  const BinInfo& info = kBinInfo[bin_index];
  char* memory = allocate_pages(info.run_pages, kAllocated, kAllocated, false);
  if (memory == nullptr) return nullptr;
  Run* run = reinterpret_cast<Run*>(memory);
  Bin& bin = bins_[bin_index];
  run->init(&bin, info, run_key_);
  bin.regions_per_run = info.nregs;
  Chunk* chunk = Chunk::of(run);
  chunk->map[chunk->page_index(run)].run_serial = bin.next_serial++;
  ++bin.run_count;
  bin.free_regions += info.nregs;
  bin.counters.created();
  return run;
}

void Arena::release_small_run(Run* run) {
  Bin& bin = *run->bin;
  const BinInfo& info = info_of(bin);
  --bin.run_count;
  bin.free_regions -= info.nregs;
  bin.counters.destroyed();
  Chunk* chunk = Chunk::of(run);
  free_pages(chunk, chunk->page_index(run), info.run_pages);
}

// An emptied run stays in its bin, outside the container, until another run
// of the bin empties (then the older of the two goes back to the arena), or
// until 4,096 to 8,192 small frees in the arena went by without reusing it
// (sweep_empty_runs), or until the program trims; and at once when nothing
// else in its chunk is allocated, so that it never holds a chunk (and the
// chunk's dirty pages) on its own. Two reasons:
// - a double free of an address in it is still caught: its bit says free,
//   whereas pages given back at once can be reused by another size class,
//   which a second free would then hit;
// - a malloc/free pair at a bin's edge (the bin's only run filling and
//   emptying) reuses the run instead of carving and returning pages each time.
// The container never sees the kept run: it is used only when the container
// is empty, in place of a new run, so what the containers choose between is
// unchanged.
void Arena::keep_empty_run(Bin& bin, Run* run) {
  if (bin.empty_run != nullptr) release_kept_run(bin);
  bin.empty_run = run;
  bin.empty_run_aged = false;
  Chunk* chunk = Chunk::of(run);
  chunk->kept_pages += info_of(bin).run_pages;
  release_kept_runs_if_idle(chunk);
}

Run* Arena::take_kept_run(Bin& bin) {
  Run* run = bin.empty_run;
  if (run == nullptr) return nullptr;
  bin.empty_run = nullptr;
  Chunk::of(run)->kept_pages -= info_of(bin).run_pages;
  return run;
}

void Arena::release_kept_run(Bin& bin) { release_small_run(take_kept_run(bin)); }

// May unmap `chunk` (once its last kept run is released): only compares
// addresses with it afterwards.
void Arena::release_kept_runs_if_idle(Chunk* chunk) {
  if (chunk->kept_pages == 0 || chunk->allocated_pages != chunk->kept_pages) return;
  for (Bin& bin : bins_) {
    if (bin.empty_run != nullptr && Chunk::of(bin.empty_run) == chunk) release_kept_run(bin);
  }
}

void Arena::release_empty_runs() {
  for (Bin& bin : bins_) {
    if (bin.empty_run != nullptr) release_kept_run(bin);
  }
}

void Arena::sweep_empty_runs() {
  frees_until_sweep_ = kEmptyRunSweepFrees;
  for (Bin& bin : bins_) {
    if (bin.empty_run == nullptr) continue;
    if (bin.empty_run_aged) {
      release_kept_run(bin);
    } else {
      bin.empty_run_aged = true;
    }
  }
}

void* Arena::malloc_small(std::size_t bin_index) {
  const BinInfo& info = kBinInfo[bin_index];
  LockGuard guard(lock);
  Bin& bin = bins_[bin_index];
  Run* run = pick_run(bin);
  bin.counters.pick(bin.runs.size(), run ? run->free_count : 0, info.nregs);
  const bool fresh = run == nullptr;
  if (fresh) {
    run = take_kept_run(bin);
    if (run == nullptr) run = new_small_run(bin_index);
    if (run == nullptr) return nullptr;
  }
  void* region = run->take(info);
  ++bin.regions_in_use;
  --bin.free_regions;
  ++bin.nmalloc;
  // A fresh run joins the set once it holds a region (a run has at least two
  // regions, so it is not full yet); a member leaves when it fills.
  if (fresh) {
    insert_run(bin, run);
  } else if (run->free_count == 0) {
    erase_run(bin, run);
  } else {
    touched_run(bin, run);
  }
  return region;
}

BadPointer Arena::free(Chunk* chunk, void* p) {
  LockGuard guard(lock);
  const PointerClass target = classify(chunk, p);
  if (target.problem != BadPointer::kNone) return target.problem;

  if (target.run == nullptr) {
    const std::size_t pages = target.large_size >> kPageShift;
    // Only kept runs left after this free? (free_pages may unmap an empty chunk.)
    const bool leaves_kept_runs_alone =
        chunk->kept_pages != 0 && chunk->allocated_pages - pages == chunk->kept_pages;
    large_allocated_ -= target.large_size;
    ++large_nfree_;
    free_pages(chunk, target.page, pages);
    if (leaves_kept_runs_alone) release_kept_runs_if_idle(chunk);
    return BadPointer::kNone;
  }

  Run* run = target.run;
  Bin& bin = *run->bin;
  const BinInfo& info = *target.info;
  const bool was_full = run->free_count == 0;
  if (!run->give(target.region)) return BadPointer::kDoubleFreeSmall;
  --bin.regions_in_use;
  ++bin.free_regions;
  ++bin.nfree;
  if (run->free_count == info.nregs) {
    // Empty: leave the set (a run always has >= 2 regions, so it was in it).
    erase_run(bin, run);
    keep_empty_run(bin, run);
  } else if (was_full) {
    insert_run(bin, run);
  } else {
    touched_run(bin, run);
  }
  if (--frees_until_sweep_ == 0) sweep_empty_runs();
  return BadPointer::kNone;
}

}  // namespace runsel
