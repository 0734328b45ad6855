// An arena: one lock, its chunks, best-fit trees of free page runs (one per
// class tag), the 45 (or 48) small bins, a few spare chunks and its purge
// policy (purge.h). `lock` guards all of it. Each method says whether it takes the lock itself
// (RUNSEL_EXCLUDES: the caller must not hold it) or expects the caller to
// hold it (RUNSEL_REQUIRES); clang's -Wthread-safety checks every call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "arena/base.h"
#include "arena/bin.h"
#include "arena/chunk.h"
#include "arena/huge.h"
#include "arena/large_run_cache.h"
#include "arena/pointer_class.h"
#include "arena/purge.h"
#include "arena/run.h"
#include "arena/size_classes.h"
#include "platform/lock.h"
#include "structures/chunk_registry.h"
#include "structures/rb_tree.h"

struct runsel_chunk_map;  // runsel.h
struct runsel_stats_t;    // runsel.h

namespace runsel {

// Orders free page runs of one class tag by (size, address) for best fit with
// the lowest address.
struct FreeRunOrder {
  static TreeLinks<PageMapEntry>& links(PageMapEntry* e) { return e->avail; }
  static bool less(const PageMapEntry* a, const PageMapEntry* b) {
    std::size_t sa = a->size_bytes(), sb = b->size_bytes();
    if (sa != sb) return sa < sb;
    return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
  }
};

class Arena {
 public:
  // A kept empty run goes back to the arena after 4,096 to 8,192 small frees
  // in its arena that did not reuse it.
  static constexpr std::uint32_t kEmptyRunSweepFrees = 4096;

  // Before the huge lock, the metadata allocator's and the registry's
  // (memory/README.md, "Lock order"); no two arenas' locks are held at once
  // but in fork preparation, which takes them in index order.
  Lock lock RUNSEL_ACQUIRED_BEFORE(huge::g_lock, base::g_lock, g_registry_lock);

  // The bin a caller that knows none passes for the bin it expects (free_sized,
  // classify): the geometry then comes from the run header.
  static constexpr std::size_t kAnyBin = ~std::size_t{0};

  // Creates an arena in metadata memory (no lock needed).
  static Arena* create(unsigned index, const PurgeSettings& settings);

  unsigned index() const { return index_; }

  // Small: `bin_index` from bin_index(size). Returns nullptr when out of memory.
  void* malloc_small(std::size_t bin_index) RUNSEL_EXCLUDES(lock);
  // The same while the process has one thread (os::single_threaded()), inline
  // (small_paths.h): malloc() then pays no call into the arena.
  void* malloc_small_one_thread(std::size_t bin_index) RUNSEL_EXCLUDES(lock);
  // Large: `size` a page multiple in (0, kMaxLargeSize]. When `zero`, only the
  // pages that were dirty are cleared (others are fresh or purged: zero).
  void* malloc_large(std::size_t size, bool zero) RUNSEL_EXCLUDES(lock);
  // Large with `alignment` a power of two > kPageSize.
  void* malloc_large_aligned(std::size_t size, std::size_t alignment) RUNSEL_EXCLUDES(lock);

  // Frees `p` in `chunk` (owned by this arena). Returns kNone or the problem.
  BadPointer free(Chunk* chunk, void* p) RUNSEL_EXCLUDES(lock);
  // The same while the process has one thread, inline like
  // malloc_small_one_thread: only a large free, an emptied run and the
  // periodic sweep of kept runs are calls.
  BadPointer free_one_thread(Chunk* chunk, void* p, std::size_t expected_bin = kAnyBin)
      RUNSEL_EXCLUDES(lock);
  // Arena::free with the bin the caller knows (sized delete), or kAnyBin.
  BadPointer free_sized(Chunk* chunk, void* p, std::size_t expected_bin) RUNSEL_EXCLUDES(lock);
  // Frees `p` in `chunk` (owned by this arena) from a thread of another
  // arena. A small region is freed without this arena's lock:
  // - It is checked as free() checks it (page map, run header).
  // - It is queued on the arena's remote frees, a lock-free stack linked
  //   through the regions' second words (the first holds the freed key,
  //   arena/freed_key.h).
  // - Whoever next holds the lock takes the queue in (take_remote_frees).
  // A double free is then caught there, by the region's bitmap bit (twice in
  // the queue: the second visit finds the bit set). Or it is caught before, by
  // any path that finds the key and takes the queue in (the thread cache's
  // push, usable_size). Large allocations take the lock, but in the fast
  // profile, which queues them as regions unless their first word holds the
  // key already (a double free the locked free reports). Returns kNone or
  // the problem.
  BadPointer free_remote(Chunk* chunk, void* p) RUNSEL_EXCLUDES(lock);
  // Queues regions[0..count) of this arena, as free_remote would one by one,
  // with one compare-and-swap: a thread cache's flush of another arena's
  // regions, each checked as free_remote checks it when it entered the cache
  // and holding the freed key since. Their bitmap bits are left to
  // take_remote_frees, as free_remote leaves them.
  void free_remote_batch(void* const* regions, std::size_t count) RUNSEL_EXCLUDES(lock);
  // Frees every region queued by free_remote; aborts naming a region that
  // was already free. Cheap when the queue is empty (one load).
  void take_remote_frees() RUNSEL_REQUIRES(lock) {
    if (remote_frees_.load(std::memory_order_relaxed) != nullptr) take_queued_remote_frees();
  }
  // The same from outside the lock: takes it when the queue is not empty.
  void take_remote_frees_now() RUNSEL_EXCLUDES(lock) {
    if (remote_frees_.load(std::memory_order_relaxed) == nullptr) return;
    LockGuard guard(lock);
    take_remote_frees();
  }

  // The thread cache's batches (frontend/thread_cache.h; cache_batches.cpp),
  // each under one acquisition of the lock. fill_batch takes up to `wanted`
  // regions of class `bin_index` into out[0..n), in the order malloc would have
  // taken them, and returns n (fewer only when out of memory).
  // flush_batch frees `count` regions of this arena that a thread cache held
  // (checked when they entered it); a region that is no longer a live one
  // aborts, naming it.
  std::size_t fill_batch(std::size_t bin_index, void** out, std::size_t wanted)
      RUNSEL_EXCLUDES(lock);
  void flush_batch(void* const* regions, std::size_t count) RUNSEL_EXCLUDES(lock);
  // classify() without the lock, for a pointer the caller claims is live: as
  // free_remote reads them, the page map entry and run header of a live
  // region do not change while it is live. `expected_bin` as in classify.
  PointerClass classify_live(Chunk* chunk, const void* p,
                             std::size_t expected_bin) const RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
    return classify(chunk, p, expected_bin);
  }

  // Whether a chunk that held a small run stays mapped, and this arena's, for
  // the life of the process: its pages keep their class tags, and a tagged
  // chunk is never unmapped (chunk.h). Not in the as-built profile, whose
  // emptied chunks are unmapped. Fixed once the arena exists.
  bool keeps_small_chunks() const RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
    return !purge_.as_built_lifecycle;
  }

  // The thread cache's inline free (frontend/thread_cache.h): the start of a
  // small region, classified from the class tag of its page's entry (chunk.h)
  // instead of the run header's keyed check. The header's bin pointer must be
  // the tagged class's bin: equal, it names what the page map says, so the
  // key adds nothing; damaged or forged, it differs. The run, class and
  // region, or a null run for anything else (any problem, a large
  // allocation, a damaged header): classify_live then says what it is.
  PointerClass classify_tagged(Chunk* chunk, const void* p) const RUNSEL_NO_THREAD_SAFETY_ANALYSIS;

  // The bytes of the freed large runs the arena keeps (the fast profile; still
  // large_allocated to the page map; 0 without the cache), and giving them back.
  std::size_t cached_large_bytes() const RUNSEL_REQUIRES(lock) { return large_cache_.bytes(); }
  void release_cached_large_runs() RUNSEL_REQUIRES(lock);
  // Usable size of a live pointer, or 0 with *problem set.
  std::size_t usable_size(Chunk* chunk, const void* p, BadPointer* problem) RUNSEL_EXCLUDES(lock);
  // Resizes a large allocation in place; false if the neighbours do not allow it.
  bool resize_large_in_place(Chunk* chunk, void* p, std::size_t old_size, std::size_t new_size)
      RUNSEL_EXCLUDES(lock);

  // Gives every bin's kept empty run back to the arena, purges every dirty
  // page and unmaps the spare chunks but one (malloc_trim,
  // runsel_free_dirty_pages).
  void purge_all() RUNSEL_REQUIRES(lock);
  // Runs a queued (deferred) purge or a due decay step now, whatever the
  // delay; returns the pages purged.
  std::size_t purge_due() RUNSEL_REQUIRES(lock);
  // Scales the dirty budget: `percent` of the configured one (at least 1 page).
  void scale_budget(std::size_t percent) RUNSEL_REQUIRES(lock);
  // Adds what this arena's dirty pages changed by since it last did to the
  // process-wide total (g_process_dirty_pages). Called for every arena when
  // the process's second arena is created, and by every change after that.
  void publish_dirty() RUNSEL_REQUIRES(lock) {
    if (dirty_pages_ == published_dirty_) return;
    // Modular: a decrease adds its two's complement.
    g_process_dirty_pages.fetch_add(dirty_pages_ - published_dirty_, std::memory_order_relaxed);
    published_dirty_ = dirty_pages_;
  }

  // Adds this arena's figures (from its counters) to `into`: mapped,
  // committed, allocated, waste, dirty, bookkeeping, bin_unused, the small and
  // large parts, chunks, nmalloc, nfree, purges and the bins' counts.
  void add_figures(runsel_stats_t* into) const RUNSEL_REQUIRES(lock);
  // Recomputes every figure by walking chunks, runs and containers; returns
  // false and writes what differs to stderr.
  bool walk_and_compare() const RUNSEL_REQUIRES(lock);
  // Writes one occupancy code per page for each chunk (see runsel.h,
  // runsel_chunk_maps); returns the number of chunks the arena has.
  std::size_t chunk_maps(::runsel_chunk_map* out, std::size_t capacity) const RUNSEL_REQUIRES(lock);

  std::size_t dirty_max_pages() const RUNSEL_REQUIRES(lock) { return budget_pages_; }
  // The process-wide budget the purge weighs this arena's pages against, or 0.
  std::size_t process_dirty_max_pages() const RUNSEL_REQUIRES(lock) {
    return process_budget_applies() ? purge_.total_budget_pages : 0;
  }

 private:
  friend struct ArenaWalker;

  // Everything below expects the caller to hold `lock`.

  // Where `p` in `chunk` points: never reads the memory at `p`. Whether a
  // small region is live is the caller's check (its run's bitmap).
  // `expected_bin`: the bin the caller knows `p` belongs to (sized delete),
  // or kAnyBin. The class geometry then comes from the size, not from the
  // run header; a run of another bin is classified as without it.
  PointerClass classify(Chunk* chunk, const void* p, std::size_t expected_bin = kAnyBin) const
      RUNSEL_REQUIRES(lock);
  std::size_t index_of_bin(const Bin& bin) const RUNSEL_REQUIRES(lock) {
    return static_cast<std::size_t>(&bin - bins_);
  }
  static const BinInfo& info_of(const Bin& bin) { return *bin.info; }

  // Both forms of malloc_small and free, over `Locking` (small_paths.h).
  template <class Locking>
  void* malloc_small_as(std::size_t bin_index) RUNSEL_EXCLUDES(lock);
  template <class Locking>
  BadPointer free_as(Chunk* chunk, void* p, std::size_t expected_bin) RUNSEL_EXCLUDES(lock);
  // Their rarer steps, out of line, each the last of its path: an allocation
  // when the container has no run, a run that has just emptied, the sweep of
  // kept runs, a large free. Each releases the lock.
  void* malloc_from_fresh_run_then_unlock(Bin& bin, std::size_t bin_index) RUNSEL_RELEASE(lock);
  void run_emptied_then_unlock(Bin& bin, Run* run) RUNSEL_RELEASE(lock);
  void sweep_empty_runs_then_unlock() RUNSEL_RELEASE(lock);
  void take_queued_remote_frees() RUNSEL_REQUIRES(lock);
  // free_remote's and free_remote_batch's count of queued frees (bin.cpp).
  void queued_remotely(std::size_t count) RUNSEL_EXCLUDES(lock);
  // A small free with the lock held, from start to end (the queued remote
  // frees): free_as's steps without releasing the lock.
  BadPointer free_small_locked(const PointerClass& target) RUNSEL_REQUIRES(lock);
  // After `given` regions of `run` were marked free (Run::give) with the lock
  // held, from a run that was full if `was_full`: the bin's counters, the
  // seam (the change all of them made) and the sweep, as that many single
  // frees leave them. One region for free_small_locked, a run's group for
  // flush_batch.
  void regions_given(Bin& bin, Run* run, bool was_full, std::uint32_t given) RUNSEL_REQUIRES(lock);
  // A large free with the lock held: into the cache of freed runs (the fast
  // profile) or its pages back (release_large_run). For free_large_then_unlock
  // and for the large runs another thread queued (the fast profile).
  void free_large_locked(Chunk* chunk, std::size_t page, std::size_t size) RUNSEL_REQUIRES(lock);
  void free_large_then_unlock(Chunk* chunk, std::size_t page, std::size_t size)
      RUNSEL_RELEASE(lock);
  // A large free's page-level step: the run's pages back to the arena.
  void release_large_run(Chunk* chunk, std::size_t page, std::size_t size) RUNSEL_REQUIRES(lock);
  // Whether the large allocation at `page` is in the cache of freed runs (a
  // double free); always false without the cache.
  bool large_run_cached(Chunk* chunk, std::size_t page, std::size_t size) RUNSEL_REQUIRES(lock) {
    return large_cache_.holds(chunk->page_address(page), size >> kPageShift);
  }

  Run* new_small_run(std::size_t bin_index) RUNSEL_REQUIRES(lock);
  // The class tag a run of bin `bin_index` leaves on its pages: none in the
  // as-built profile (purge.h), which coalesces every free run.
  std::uintptr_t class_tag_of(std::size_t bin_index) const RUNSEL_REQUIRES(lock) {
    return purge_.as_built_lifecycle ? 0 : class_tag_of_bin(bin_index);
  }
  void release_small_run(Run* run) RUNSEL_REQUIRES(lock);
  // An emptied run, just erased from its container: kept, or given back.
  void keep_empty_run(Bin& bin, Run* run) RUNSEL_REQUIRES(lock);
  // The bin's kept run, no longer kept (null if none); or given back.
  Run* take_kept_run(Bin& bin) RUNSEL_REQUIRES(lock);
  void release_kept_run(Bin& bin) RUNSEL_REQUIRES(lock);
  // Gives back the kept runs in `chunk` if nothing else in it is allocated.
  void release_kept_runs_if_idle(Chunk* chunk) RUNSEL_REQUIRES(lock);
  void release_empty_runs() RUNSEL_REQUIRES(lock);
  // Every kEmptyRunSweepFrees small frees: releases the kept runs that were
  // already kept at the previous sweep, and marks the others.
  void sweep_empty_runs() RUNSEL_REQUIRES(lock);
  // The run header's bin pointer names one of this arena's bins and matches
  // the header's check value.
  bool run_header_intact(const Run* run) const RUNSEL_REQUIRES(lock) {
    const std::uintptr_t bin = reinterpret_cast<std::uintptr_t>(run->bin);
    const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(bins_);
    return bin - first < sizeof(bins_) && run->header_intact(run_key_);
  }
  // The geometry of an intact run's class (the bin's pointer to its entry of
  // the geometry in force). One load from the bin the free updates anyway:
  // five instructions fewer per free than the bin's index in bins_ and the
  // table (a division by sizeof(Bin) and the table's address).
  const BinInfo& info_of_run(const Run* run) const RUNSEL_REQUIRES(lock) { return *run->bin->info; }
  // The seam: the only calls on a bin's container (small_paths.h), each with its
  // cheap assertions, and the container's walker after it in checked builds.
  // pick_run: the run for the next small allocation, whatever the container says.
  Run* pick_run(Bin& bin) RUNSEL_REQUIRES(lock);
  void insert_run(Bin& bin, Run* run) RUNSEL_REQUIRES(lock);
  void erase_run(Bin& bin, Run* run) RUNSEL_REQUIRES(lock);
  void touched_run(Bin& bin, Run* run) RUNSEL_REQUIRES(lock);

  // Page-level allocation: a run of `pages` from the best-fit free run among
  // the pages tagged `class_tag` (a small run's class_tag_of_bin(), or 0 for
  // a large allocation), else among untagged pages (chunk.h).
  // `head_bits` is written to the first page, `tail_bits` to the others.
  char* allocate_pages(std::size_t pages, std::uintptr_t class_tag, std::uintptr_t head_bits,
                       std::uintptr_t tail_bits, bool zero) RUNSEL_REQUIRES(lock);
  // The best-fit free run of at least `pages` pages tagged exactly `class_tag`.
  PageMapEntry* best_fit(std::size_t pages, std::uintptr_t class_tag) const RUNSEL_REQUIRES(lock);
  // Takes the first `pages` pages of the free run starting at `first`
  // (already removed from the tree); the remainder goes back to the tree.
  void carve(Chunk* chunk, std::size_t first, std::size_t run_pages, std::size_t pages)
      RUNSEL_REQUIRES(lock);
  void mark_allocated(Chunk* chunk, std::size_t first, std::size_t pages, std::uintptr_t head_bits,
                      std::uintptr_t tail_bits, bool zero) RUNSEL_REQUIRES(lock);
  // Frees pages, which keep `class_tag` (a small run's, or 0): chunk.h.
  void free_pages(Chunk* chunk, std::size_t first, std::size_t pages, std::uintptr_t class_tag = 0)
      RUNSEL_REQUIRES(lock);
  void set_free_run(Chunk* chunk, std::size_t first, std::size_t pages) RUNSEL_REQUIRES(lock);

  Chunk* new_chunk() RUNSEL_REQUIRES(lock);
  void retire_chunk(Chunk* chunk) RUNSEL_REQUIRES(lock);
  void destroy_chunk(Chunk* chunk) RUNSEL_REQUIRES(lock);
  void unlink_spare(Chunk* chunk) RUNSEL_REQUIRES(lock);
  // Unmaps the spare chunks beyond the first whose pages were all purged.
  void release_clean_spares() RUNSEL_REQUIRES(lock);
  void link_dirty(Chunk* chunk) RUNSEL_REQUIRES(lock);
  void unlink_dirty(Chunk* chunk) RUNSEL_REQUIRES(lock);
  void purge_down_to(std::size_t target_pages) RUNSEL_REQUIRES(lock);
  std::size_t purge_chunk(Chunk* chunk, std::size_t target_pages) RUNSEL_REQUIRES(lock);
  void idle_tagged_chunk(Chunk* chunk) RUNSEL_REQUIRES(lock);
  // The purge policy's two hooks: after pages became dirty, and before pages
  // are handed out (the later allocation a deferred purge waits for).
  // Inline, the common case of a process with one arena under its own budget
  // (nothing to weigh); the rest out of line.
  void after_pages_dirtied() RUNSEL_REQUIRES(lock) {
    if (purge_.policy != PurgePolicy::kDecay && dirty_pages_ <= budget_pages_ &&
        !g_several_arenas.load(std::memory_order_relaxed)) {
      return;
    }
    weigh_dirty_pages();
  }
  void weigh_dirty_pages() RUNSEL_REQUIRES(lock);
  bool process_budget_applies() const RUNSEL_REQUIRES(lock);
  std::size_t weighed_dirty() const RUNSEL_REQUIRES(lock);
  std::size_t weighed_budget() const RUNSEL_REQUIRES(lock);
  void purge_to_half_budget() RUNSEL_REQUIRES(lock);
  void purge_at_bound() RUNSEL_REQUIRES(lock);
  void purge_peers_to(std::size_t target) RUNSEL_REQUIRES(lock);
  void before_page_allocation() RUNSEL_REQUIRES(lock) {
    if (!purge_queued_ && purge_.policy != PurgePolicy::kDecay) return;  // nothing waits
    before_page_allocation_slow();
  }
  void before_page_allocation_slow() RUNSEL_REQUIRES(lock);
  // The third hook, after mark_allocated committed `fresh_pages` pages that
  // were not dirty (PurgeSettings::growth_dirty_share). Inline, the common
  // case of pages reused from dirty ones (one comparison), and a process
  // with one arena; the growth purge out of line.
  void after_pages_committed(std::size_t fresh_pages) RUNSEL_REQUIRES(lock) {
    if (fresh_pages == 0 || !g_several_arenas.load(std::memory_order_relaxed)) return;
    purge_for_growth(fresh_pages);
  }
  void purge_for_growth(std::size_t fresh_pages) RUNSEL_REQUIRES(lock);
  void run_decay_step(std::uint64_t now) RUNSEL_REQUIRES(lock);
  void check_container(const Bin& bin) const RUNSEL_REQUIRES(lock);

  // Set by create() before the arena is published, constant after: read
  // without the lock.
  unsigned index_ = 0;
  Arena* next_arena_ = nullptr;  // the arena created before this one (newest_)
  // Every arena, the newest first, linked through next_arena_ (set before
  // publication, constant after): the process-wide purge walks them.
  static inline constinit std::atomic<Arena*> newest_{nullptr};
  RunKey run_key_;  // mixed into every run header's check value
  PurgeSettings purge_ RUNSEL_GUARDED_BY(lock);
  // purge_.budget_pages scaled for this arena.
  std::size_t budget_pages_ RUNSEL_GUARDED_BY(lock) = 0;
  bool purge_queued_ RUNSEL_GUARDED_BY(lock) = false;  // deferred: a purge waits for its delay
  std::size_t allocations_until_purge_ RUNSEL_GUARDED_BY(lock) = 0;
  DirtyDecay decay_ RUNSEL_GUARDED_BY(lock);
  // The best-fit trees of free page runs, one per class tag (chunk.h): [0]
  // untagged, [1 + b] the pages bin b's runs last held. Apart, so that a
  // request searches only the pages it may use.
  RbTree<PageMapEntry, FreeRunOrder> free_runs_[kNumBins + 1] RUNSEL_GUARDED_BY(lock);
  void insert_free_run(PageMapEntry* head) RUNSEL_REQUIRES(lock) {
    free_runs_[head->class_tag() >> kClassTagShift].insert(head);
  }
  void erase_free_run(PageMapEntry* head) RUNSEL_REQUIRES(lock) {
    free_runs_[head->class_tag() >> kClassTagShift].erase(head);
  }
  // Spare chunks (all usable pages free) kept for reuse instead of a munmap
  // and a fresh mmap (plus an mprotect for the guard page): at most
  // purge_.spare_chunks. Their dirty pages count against the purge policy like
  // any other; a purged spare chunk costs only its header pages. Purging
  // everything (runsel_free_dirty_pages) unmaps all spares but one.
  // Idle chunks (nothing allocated, class tags kept) whose dirty pages wait
  // for the purge policy: the purge_.idle_dirty_chunks most recently emptied;
  // older ones are purged when another empties.

  // Every chunk, spare ones included; the chunks with dirty pages, oldest
  // first; the spare chunks, most recent first (structures/intrusive_list.h).
  using ChunkList = IntrusiveList<Chunk, MemberLinks<Chunk, &Chunk::in_arena>>;
  using DirtyList = IntrusiveList<Chunk, MemberLinks<Chunk, &Chunk::in_dirty>, true>;
  using SpareList = IntrusiveList<Chunk, MemberLinks<Chunk, &Chunk::in_spares>>;
  ChunkList chunks_ RUNSEL_GUARDED_BY(lock);
  DirtyList dirty_chunks_ RUNSEL_GUARDED_BY(lock);
  SpareList spares_ RUNSEL_GUARDED_BY(lock);
  std::size_t spare_count_ RUNSEL_GUARDED_BY(lock) = 0;
  // Chunks with nothing allocated that keep class tags (chunk.h), so are
  // neither spares nor unmapped: see idle_tagged_chunk().
  std::size_t idle_chunks_ RUNSEL_GUARDED_BY(lock) = 0;

  // Counters, each maintained at the place its quantity changes.
  std::uint32_t frees_until_sweep_ RUNSEL_GUARDED_BY(lock) = kEmptyRunSweepFrees;
  std::size_t chunk_count_ RUNSEL_GUARDED_BY(lock) = 0;
  // header pages + allocated run pages + dirty pages
  std::size_t committed_pages_ RUNSEL_GUARDED_BY(lock) = 0;
  std::size_t dirty_pages_ RUNSEL_GUARDED_BY(lock) = 0;
  // The part of dirty_pages_ this arena has added to g_process_dirty_pages,
  // which is always the sum of every arena's published_dirty_.
  std::size_t published_dirty_ RUNSEL_GUARDED_BY(lock) = 0;
  // Fresh pages committed since the last growth purge (purge_for_growth),
  // which purges once they reach kGrowthPurgeBatch: 256 KiB.
  static constexpr std::size_t kGrowthPurgeBatch = 64;
  std::size_t growth_pending_ RUNSEL_GUARDED_BY(lock) = 0;
  // dirty_pages_ changes only through these. The process-wide total follows
  // only once the process has several arenas (the only time it is weighed),
  // so that a process with one arena pays no locked instruction per page
  // change; publish_dirty() brings it up to date.
  void add_dirty(std::size_t pages) RUNSEL_REQUIRES(lock) {
    dirty_pages_ += pages;
    if (g_several_arenas.load(std::memory_order_relaxed)) publish_dirty();
  }
  void remove_dirty(std::size_t pages) RUNSEL_REQUIRES(lock) {
    dirty_pages_ -= pages;
    if (g_several_arenas.load(std::memory_order_relaxed)) publish_dirty();
  }
  std::size_t large_allocated_ RUNSEL_GUARDED_BY(lock) = 0;  // bytes
  std::uint64_t large_nmalloc_ RUNSEL_GUARDED_BY(lock) = 0;
  std::uint64_t large_nfree_ RUNSEL_GUARDED_BY(lock) = 0;
  // Freed short large runs kept for the next large malloc (the fast profile;
  // takes no room without it).
  [[no_unique_address]] ArenaLargeRunCache large_cache_ RUNSEL_GUARDED_BY(lock);
  std::uint64_t purges_ RUNSEL_GUARDED_BY(lock) = 0;

  Bin bins_[kNumBins] RUNSEL_GUARDED_BY(lock);
  // What the cached free's check (classify_tagged) reads of class i, beside
  // the arena it already has: &bins_[i], the run header's bin pointer, one
  // load where the address took four instructions (sizeof(Bin) is no power of
  // two), and bin_info(i)'s first region and reciprocal on the same line.
  // Written once, at creation (the geometry is set before the first arena).
  // As large as a BinInfo, so that one scaled class index finds this and the
  // thread cache's stack (thread_cache::CacheClass).
  struct alignas(sizeof(BinInfo)) TaggedClass {
    const Bin* bin = nullptr;
    // 64 bits, so that the product takes it from memory.
    std::uint64_t reciprocal = 0;
    std::uint32_t reg0_offset = 0;
    // The reciprocal's low half again, for region_at's test: read from here,
    // it needs no register copy of the reciprocal (one instruction).
    std::uint32_t reciprocal_low = 0;
  };
  TaggedClass tagged_classes_[kNumBins] = {};

  // Regions freed by other threads, not yet taken in (free_remote): the
  // newest first, each region's first word the next. On its own cache line,
  // which only remote frees and the lock holder's check touch.
  alignas(64) std::atomic<void*> remote_frees_{nullptr};
};

// Whether the arena chunk at `address` (chunk-aligned) still has its canary
// (chunk.h); true when no arena chunk is there. Takes that arena's lock.
bool chunk_canary_intact(const void* address);

}  // namespace runsel

// The inline parts that need the whole Arena: the container links' check and
// the classification of a pointer on every free.
#include "arena/pointer_class_inline.h"
#include "arena/run_links.h"
