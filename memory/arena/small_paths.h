// The small malloc and free paths and the container seam, inline: every
// malloc and free of a small size runs them, so the C entry points compile
// them in and pay no call into the arena. The bin is the only code that calls
// its container, through the four seam functions here.
//
// The call tree (frontend/malloc_api.cpp down; [call] marks an out-of-line
// step, each the last of its path and releasing the lock itself). The malloc
// side:
//
//   malloc, calloc, ...  allocate()                      inline
//     one thread         Arena::malloc_small_one_thread   inline
//     threads            Arena::malloc_small  [call]      bin.cpp
//       malloc_small_as<Locking>
//         take_remote_frees                  threads only; one load when empty
//         pick_run                           seam: the container picks
//         Run::take                          run.h: the bitmap's first free bit
//         erase_run | touched_run            seam: full leaves, else re-keyed
//         malloc_from_fresh_run_then_unlock  [call] bin.cpp: no run to pick.
//
// The free side:
//
//   free                 deallocate()                     inline
//     one thread         Arena::free_one_thread           inline
//     threads            Arena::free | free_remote [call] bin.cpp
//       free_as<Locking>
//         classify                           pointer_class_inline.h: page map,
//                                            run header's keyed check.
//         Run::give                          run.h: the bitmap's double-free check
//         insert_run | touched_run           seam: a full run rejoins, else re-keyed
//         run_emptied_then_unlock            [call] bin.cpp: kept or given back
//         sweep_empty_runs_then_unlock       [call] bin.cpp: every 4,096 frees
//         free_large_then_unlock             [call] arena.cpp.
#pragma once

#include "arena/arena.h"
#include "platform/assert.h"
#include "platform/fatal.h"

namespace runsel {

inline void Arena::check_container(const Bin& bin) const {
  if constexpr (kChecked) {
    const char* why = nullptr;
    if (!bin.nonfull.check(&why)) fatal("checked build: run container invariant broken: ", why);
  } else {
    (void)bin;
  }
}

// ---- the seam ----------------------------------------------------------------
// A run is in its bin's container exactly when 0 < free_count < nregs (run.h).
// Each call asserts its side of that, cheaply (the containers assert in their
// own erase() that the run is a member), and the bin identity: the bin's
// regions, in use or free, are exactly its runs' regions.

inline bool bin_identity_holds(const Bin& bin, const BinInfo& info) {
  return bin.regions_in_use + bin.free_regions == bin.run_count * info.nregs;
}

// What a member of `bin`'s container is: one of its runs, neither full nor empty.
inline bool is_container_run(const Bin& bin, const BinInfo& info, const Run* run) {
  return run->bin == &bin && run->free_count > 0 && run->free_count < info.nregs;
}

inline Run* Arena::pick_run(Bin& bin) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  Run* run = bin.nonfull.pick();
  RUNSEL_ASSERT(run == nullptr || is_container_run(bin, info_of(bin), run));
  return run;
}

inline void Arena::insert_run(Bin& bin, Run* run) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  RUNSEL_ASSERT(is_container_run(bin, info_of(bin), run));
  bin.nonfull.insert(run);
  check_container(bin);
}

// `run` has just filled or emptied.
inline void Arena::erase_run(Bin& bin, Run* run) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  RUNSEL_ASSERT(run->bin == &bin);
  RUNSEL_ASSERT(run->free_count == 0 || run->free_count == info_of(bin).nregs);
  RUNSEL_ASSERT(bin.nonfull.size() > 0);
  bin.nonfull.erase(run);
  check_container(bin);
}

// An allocation or a free changed the occupancy of `run`, which stays a member.
inline void Arena::touched_run(Bin& bin, Run* run) {
  RUNSEL_ASSERT(bin_identity_holds(bin, info_of(bin)));
  RUNSEL_ASSERT(is_container_run(bin, info_of(bin), run));
  bin.nonfull.touched(run);
  check_container(bin);
}

// ---- malloc and free -----------------------------------------------------------
// Each is one template over two ways of taking the lock (Locking below). The
// C entry points run the one-thread form inline while the process has one
// thread: its common case makes no call, and its rarer steps are calls that
// end the path, each releasing the lock itself (the *_then_unlock
// functions), so nothing has to be kept across a call. With threads they
// call the any-thread form, out of line (bin.cpp).

// The lock while the process has one thread (the caller has checked): no
// other thread can have queued a remote free.
struct OneThreadLocking {
  static constexpr bool kAnyThread = false;
  static void acquire(Lock& lock) RUNSEL_ACQUIRE(lock) { lock.lock_single_threaded(); }
  static void release(Lock& lock) RUNSEL_RELEASE(lock) { lock.unlock_single_threaded(); }
};

// The lock whatever the number of threads.
struct AnyThreadLocking {
  static constexpr bool kAnyThread = true;
  static void acquire(Lock& lock) RUNSEL_ACQUIRE(lock) { lock.lock(); }
  static void release(Lock& lock) RUNSEL_RELEASE(lock) { lock.unlock(); }
};

template <class Locking>
[[gnu::always_inline]] inline void* Arena::malloc_small_as(std::size_t bin_index) {
  const BinInfo& info = bin_info(bin_index);
  Locking::acquire(lock);
  if constexpr (Locking::kAnyThread) take_remote_frees();
  Bin& bin = bins_[bin_index];
  Run* run = pick_run(bin);
  bin.counters.pick(bin.nonfull.size(), run ? run->free_count : 0, info.nregs);
  if (run == nullptr) return malloc_from_fresh_run_then_unlock(bin, bin_index);
  void* region = run->take(info);
  ++bin.regions_in_use;
  --bin.free_regions;
  ++bin.nmalloc;
  // A member leaves the set when it fills.
  if (run->free_count == 0) {
    erase_run(bin, run);
  } else {
    touched_run(bin, run);
  }
  Locking::release(lock);
  return region;
}

[[gnu::always_inline]] inline void* Arena::malloc_small_one_thread(std::size_t bin_index) {
  return malloc_small_as<OneThreadLocking>(bin_index);
}

template <class Locking>
[[gnu::always_inline]] inline BadPointer Arena::free_as(Chunk* chunk, void* p,
                                                        std::size_t expected_bin) {
  Locking::acquire(lock);
  if constexpr (Locking::kAnyThread) take_remote_frees();
  const PointerClass target = classify(chunk, p, expected_bin);
  if (target.problem != BadPointer::kNone) {
    Locking::release(lock);
    return target.problem;
  }
  if (target.run == nullptr) {
    if (large_run_cached(chunk, target.page, target.large_size)) [[unlikely]] {
      Locking::release(lock);
      return BadPointer::kDoubleFreeLarge;
    }
    free_large_then_unlock(chunk, target.page, target.large_size);
    return BadPointer::kNone;
  }
  Run* run = target.run;
  Bin& bin = *run->bin;
  const bool was_full = run->free_count == 0;
  if (!run->give(target.region)) {
    Locking::release(lock);
    return BadPointer::kDoubleFreeSmall;
  }
  bin.region_freed();
  if (run->free_count == target.info->nregs) {
    run_emptied_then_unlock(bin, run);
    return BadPointer::kNone;
  }
  if (was_full) {
    insert_run(bin, run);
  } else {
    touched_run(bin, run);
  }
  if (--frees_until_sweep_ == 0) {
    sweep_empty_runs_then_unlock();
    return BadPointer::kNone;
  }
  Locking::release(lock);
  return BadPointer::kNone;
}

[[gnu::always_inline]] inline BadPointer Arena::free_one_thread(Chunk* chunk, void* p,
                                                                std::size_t expected_bin) {
  return free_as<OneThreadLocking>(chunk, p, expected_bin);
}

}  // namespace runsel
