// A size class's bin: its container of non-full runs (the build's selected
// container, containers/selected.h) and its counters. Only the bin's arena
// touches it, under the arena's lock.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/base.h"
#include "arena/pick_counters.h"
#include "arena/run.h"
#include "arena/size_classes.h"
#include "containers/selected.h"

namespace runsel {

inline void* RunTraits::allocate(std::size_t bytes) { return base::allocate(bytes); }
inline void RunTraits::release(void* p, std::size_t bytes) { base::release(p, bytes); }

using NonFullRuns = SelectedContainer<RunTraits>;
static_assert(NonFullRunSet<NonFullRuns, Run>);

// A size class's runs. Only the bin touches its container.
struct Bin {
  NonFullRuns nonfull;  // runs with 0 < free regions < nregs
  // The class's geometry (bin_info's entry; set when the arena is created), so
  // a free reaches it from the run header's bin pointer in one load.
  const BinInfo* info = nullptr;
  // The keyed check of this bin's runs (run.h), for checking container
  // links: the first factor premixed (this bin's address ^ the arena's run
  // key) and the key's swapped halves (keyed_check32_mixed).
  std::uint64_t check_factor = 0;
  std::uint64_t check_rotated = 0;
  // A chunk of this bin's arena, other than the member's, that linked()
  // found in the chunk registry: a link into it needs no registry lookup
  // (two dependent loads and a dozen instructions) to be safe to read. It
  // stays mapped while it is the arena's: Arena::destroy_chunk clears it
  // before the chunk is unmapped. 0: none.
  std::uintptr_t linked_chunk = 0;
  // The two runs linked() accepted last (newest first): runs of this bin
  // until release_small_run, which forgets them, so a link to one of them
  // is safe to follow without reading its header again. Both containers'
  // operations touch the same few neighbours over and over. Null: none.
  const Run* linked_runs[2] = {nullptr, nullptr};
  // The most recently emptied run, kept outside the container (see bin.cpp);
  // counted in run_count and free_regions like any run of the bin.
  Run* empty_run = nullptr;
  bool empty_run_aged = false;     // kept through a whole sweep period unused
  std::size_t run_count = 0;       // runs owned by the bin
  std::size_t regions_in_use = 0;  // allocated regions in those runs
  std::size_t free_regions = 0;    // free regions in those runs
  std::uint64_t nmalloc = 0;
  std::uint64_t nfree = 0;
  // The class's regions per run (bin_info's nregs; set with each new run)
  // and the serial number of the next run it creates: keys some containers
  // read through RunTraits.
  std::uint32_t regions_per_run = 0;
  std::uint64_t next_serial = 0;
  [[no_unique_address]] PickCounters counters;  // empty unless counting

  // A region of one of its runs was given back (the run's bitmap already says so).
  void region_freed() {
    --regions_in_use;
    ++free_regions;
    ++nfree;
  }
};

inline std::uint32_t RunTraits::regions(const Run* run) { return run->bin->regions_per_run; }

}  // namespace runsel
