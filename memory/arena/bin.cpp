// Small allocations: runs, the bins' kept empty runs, and the steps of the
// small paths (small_paths.h) that are not on every call.
#include "arena/freed_key.h"
#include "arena/small_paths.h"
#include "platform/fatal.h"
#include "structures/chunk_registry.h"

namespace runsel {

// ---- runs and regions ----------------------------------------------------------

Run* Arena::new_small_run(std::size_t bin_index) {
  const BinInfo& info = bin_info(bin_index);
  // Its pages carry its class tag while it is allocated too, whatever the
  // lifecycle (Arena::classify_tagged reads it).
  const std::uintptr_t tagged = kAllocated | class_tag_of_bin(bin_index);
  char* memory = allocate_pages(info.run_pages, class_tag_of(bin_index), tagged, tagged, false);
  if (memory == nullptr) return nullptr;
  Run* run = reinterpret_cast<Run*>(memory);
  Bin& bin = bins_[bin_index];
  run->init(&bin, info, run_key_);
  bin.regions_per_run = info.nregs;
  RunTraits::hook(run) = {};  // (the page map's: no links of an earlier run there)
  RunTraits::head(run).serial = bin.next_serial++;
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
  run->check = ~run->check;  // a stale link to this header no longer passes as a run
  for (const Run*& accepted : bin.linked_runs) {  // nor through linked()'s memory of it
    if (accepted == run) accepted = nullptr;
  }
  Chunk* chunk = Chunk::of(run);
  free_pages(chunk, chunk->page_index(run), info.run_pages, class_tag_of(index_of_bin(bin)));
}

// An emptied run stays in its bin, outside the container. It goes back to the
// arena:
// - When another run of the bin empties: the older of the two goes back.
// - When 4,096 to 8,192 small frees in the arena went by without reusing it
//   (sweep_empty_runs).
// - When the program trims.
// - At once when nothing else in its chunk is allocated, so that it never
//   holds a chunk (and the chunk's dirty pages) on its own.
// Two reasons to keep it:
// - A double free of an address in it is still caught: its bit says free.
//   Pages given back at once could be reused by another size class, which a
//   second free would then hit.
// - A malloc/free pair at a bin's edge (the bin's only run filling and
//   emptying) reuses the run instead of carving and returning pages each time.
// The container never sees the kept run: it is used only when the container
// is empty, in place of a new run, so what the containers choose between is
// unchanged. Inline in both callers in this file (each free that empties a
// run): out of line it cost about 16 instructions of call and spills.
// The as-built profile keeps none: mozjemalloc gives the run back at once.
[[gnu::always_inline]] inline void Arena::keep_empty_run(Bin& bin, Run* run) {
  if (purge_.as_built_lifecycle) {
    release_small_run(run);
    return;
  }
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

// The container had no run: the bin's kept empty run, else a new one, joins
// it once it holds the region taken now (a run has at least two regions, so
// it is not full yet).
void* Arena::malloc_from_fresh_run_then_unlock(Bin& bin, std::size_t bin_index) {
  Run* run = take_kept_run(bin);
  if (run == nullptr) run = new_small_run(bin_index);
  if (run == nullptr) {
    lock.unlock();
    return nullptr;
  }
  void* region = run->take(info_of(bin));
  ++bin.regions_in_use;
  --bin.free_regions;
  ++bin.nmalloc;
  insert_run(bin, run);
  lock.unlock();
  return region;
}

// `run` has just emptied: it leaves the set (a run always has >= 2 regions,
// so it was in it) and becomes the bin's kept run.
void Arena::run_emptied_then_unlock(Bin& bin, Run* run) {
  erase_run(bin, run);
  keep_empty_run(bin, run);
  if (--frees_until_sweep_ == 0) sweep_empty_runs();
  lock.unlock();
}

void Arena::sweep_empty_runs_then_unlock() {
  sweep_empty_runs();
  lock.unlock();
}

// ---- remote frees ---------------------------------------------------------------

namespace {
// Remote frees this thread made since it last tried to take in an arena's
// queue itself (so a queue whose arena nobody uses any more still drains).
constinit thread_local std::uint32_t t_remote_frees = 0;
constexpr std::uint32_t kRemoteFreesPerTry = 64;
}  // namespace

// After this thread queued `count` frees on this arena: every
// kRemoteFreesPerTry of them, it tries the lock and takes the queue in itself.
void Arena::queued_remotely(std::size_t count) RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  t_remote_frees += static_cast<std::uint32_t>(count);
  if (t_remote_frees < kRemoteFreesPerTry) return;
  t_remote_frees = 0;
  if (lock.try_lock()) {
    take_remote_frees();
    lock.unlock();
  }
}

// Reads the page map and the run header without the lock: for a live region
// neither changes while it is live (a run's pages and header are written when
// the run is made and when it is given back, both only when it holds no live
// region). What the pointer points at is checked as under the lock; only the
// bitmap is left for take_queued_remote_frees. A queued region holds the freed
// key in its first word (arena/freed_key.h: a lock-free path that asks whether
// it is live then looks here) and its encoded link in its second.
BadPointer Arena::free_remote(Chunk* chunk, void* p) RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  // A small region the page map's class tag and the header's bin pointer
  // agree on (classify_tagged, the thread cache's inline check), else the
  // keyed check, which also says what anything else is.
  PointerClass target = classify_tagged(chunk, p);
  if (target.run == nullptr) target = classify(chunk, p);
  if (target.problem != BadPointer::kNone) return target.problem;
  // A large allocation takes the lock, except in the fast profile: there it
  // is queued as a region is (its first page holds the two words), unless
  // its first word holds the key already (queued or in the cache of freed
  // runs: a double free, which the locked free reports, or a coincidence).
  if (target.run == nullptr &&
      (!kLargeRunCache || *static_cast<const std::uintptr_t*>(p) == freed_key_of(p)))
    return free(chunk, p);
  std::uintptr_t* words = static_cast<std::uintptr_t*>(p);
  words[0] = freed_key_of(p);
  void* head = remote_frees_.load(std::memory_order_relaxed);
  do {
    words[1] = encode_queue_link(p, head);
  } while (!remote_frees_.compare_exchange_weak(head, p, std::memory_order_release,
                                                std::memory_order_relaxed));
  queued_remotely(1);
  return BadPointer::kNone;
}

// The queue as that many free_remote calls would leave it: the last region
// on top, each linked to the one before, the first to the old top.
void Arena::free_remote_batch(void* const* regions, std::size_t count) {
  if (count == 0) return;
  for (std::size_t i = count - 1; i > 0; --i) {
    std::uintptr_t* words = static_cast<std::uintptr_t*>(regions[i]);
    words[0] = freed_key_of(regions[i]);
    words[1] = encode_queue_link(regions[i], regions[i - 1]);
  }
  void* const first = regions[0];
  std::uintptr_t* first_words = static_cast<std::uintptr_t*>(first);
  first_words[0] = freed_key_of(first);
  void* head = remote_frees_.load(std::memory_order_relaxed);
  do {
    first_words[1] = encode_queue_link(first, head);
  } while (!remote_frees_.compare_exchange_weak(head, regions[count - 1], std::memory_order_release,
                                                std::memory_order_relaxed));
  queued_remotely(count);
}

// A queued region's two words are still the program's to overwrite: a write
// after the free, an overflow from the region below (strcpy one byte too
// far), or the region freed again into a thread cache. Each region must still
// carry its key, and each link must lead to a region of this arena that
// carries its own, before the link is followed or the region freed.
void Arena::take_queued_remote_frees() {
  void* p = remote_frees_.exchange(nullptr, std::memory_order_acquire);
  while (p != nullptr) {
    const std::uintptr_t* words = static_cast<const std::uintptr_t*>(p);
    if (words[0] != freed_key_of(p)) [[unlikely]]
      remote_free_rejected(p,
                           "freed again, or written after its free (its first word no "
                           "longer holds the remote-free queue's key)");
    void* next = decode_queue_link(p, words[1]);
    if (next != nullptr) {
      // A region in p's chunk is this arena's (p is); another chunk asks the registry.
      const bool ours = Chunk::of(next) == Chunk::of(p) || [&] {
        const ChunkOwner owner = ChunkRegistry::lookup(next);
        return owner.is_arena_chunk() && owner.as<Arena>() == this;
      }();
      if (!ours || *static_cast<const std::uintptr_t*>(next) != freed_key_of(next)) [[unlikely]]
        remote_free_rejected(p,
                             "written after its free (its queue link does not lead to a "
                             "region queued for this arena)");
    }
    Chunk* chunk = Chunk::of(p);
    PointerClass target = classify_tagged(chunk, p);  // as free_remote classifies
    if (target.run == nullptr) target = classify(chunk, p);
    BadPointer problem = target.problem;
    if (problem == BadPointer::kNone && target.run != nullptr) {
      problem = free_small_locked(target);
    } else if (problem == BadPointer::kNone) {  // a large run (the fast profile)
      if (large_run_cached(chunk, target.page, target.large_size)) {
        problem = BadPointer::kDoubleFreeLarge;
      } else {
        free_large_locked(chunk, target.page, target.large_size);
      }
    }
    if (problem == BadPointer::kDoubleFreeSmall) {
      remote_free_rejected(p, "double free of a small region");
    } else if (problem == BadPointer::kDoubleFreeLarge) {
      remote_free_rejected(p, "double free of a large allocation");
    } else if (problem != BadPointer::kNone) {
      remote_free_rejected(p, "not a live block any more");
    }
    p = next;
  }
}

BadPointer Arena::free_small_locked(const PointerClass& target) {
  Run* run = target.run;
  const bool was_full = run->free_count == 0;
  if (!run->give(target.region)) return BadPointer::kDoubleFreeSmall;
  regions_given(*run->bin, run, was_full, 1);
  return BadPointer::kNone;
}

void Arena::regions_given(Bin& bin, Run* run, bool was_full, std::uint32_t given) {
  bin.regions_in_use -= given;
  bin.free_regions += given;
  bin.nfree += given;
  if (run->free_count == info_of(bin).nregs) {
    // A group can take a full run to empty: it was never a member then.
    if (!was_full) erase_run(bin, run);
    keep_empty_run(bin, run);
  } else if (was_full) {
    insert_run(bin, run);
  } else {
    touched_run(bin, run);
  }
  if (frees_until_sweep_ <= given) {
    sweep_empty_runs();
  } else {
    frees_until_sweep_ -= given;
  }
}

void* Arena::malloc_small(std::size_t bin_index) {
  return malloc_small_as<AnyThreadLocking>(bin_index);
}

BadPointer Arena::free(Chunk* chunk, void* p) {
  return free_as<AnyThreadLocking>(chunk, p, kAnyBin);
}

BadPointer Arena::free_sized(Chunk* chunk, void* p, std::size_t expected_bin) {
  return free_as<AnyThreadLocking>(chunk, p, expected_bin);
}

}  // namespace runsel
