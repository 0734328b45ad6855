// The per-thread cache (-Dthread_cache=true, RUNSEL_THREAD_CACHE; off by
// default, since mozjemalloc has none): each thread keeps, per small size
// class, a bounded stack of regions it freed or took in a batch, so most small
// mallocs and frees touch no arena. jemalloc's tcache is the model:
// - Bound: twice the regions of one run of the class, within [20, 200] slots,
//   at first. A class whose stack is full twice between two GC visits (a
//   program that frees batches larger than the bound) doubles its bound, up
//   to max_capacity_of(bin) and within the thread's kGrowBudget bytes, its
//   slots moved to an array of max_capacity_of(bin) the first time; a GC visit
//   that finds a grown class idle halves its bound again.
// - A miss fills capacity >> fill_shift regions, at most kFillBytes of them,
//   from the thread's arena under one lock (Arena::fill_batch, a bitmap word
//   at a time).
// - A second miss before the GC's next visit doubles the next fill.
// - A full stack flushes its older half, owners grouped: the thread's arena
//   under one lock (Arena::flush_batch, a run's regions together), each run
//   of another arena's regions onto its remote-free queue with one
//   compare-and-swap (Arena::free_remote_batch).
// - An incremental GC visits one class every kGcTicks ticks: a region moved
//   between the cache and an arena (a fill's, a flush's) or a malloc or free
//   the inline paths left to the out-of-line ones. While the thread holds
//   more than kIdleBytes (as the GC last saw each class), it flushes three
//   quarters of the regions that stayed unused since its last visit (the
//   low-water mark) and halves the class's next fill. A class that ran empty
//   doubles it.
// - A thread whose mallocs and frees all stay in its cache takes no GC step
//   (as TCMalloc's thread caches scavenge only on their slow paths): what it
//   holds stays within its bounds and does not change. A countdown of every
//   cache event made each inline malloc and free wait on the store of the one
//   before (bench_simple_loop 13 % slower).
// - The fast profile's thread also keeps freed large runs of 1 to
//   kLargePages pages, kLargeDepth of each length (at most 320 KiB), newest
//   on top, for its next large malloc of that length: any arena's, as with
//   regions. A full stack gives its older half back through the uncached
//   free (the owner's cache of freed runs, or its remote-free queue). The GC
//   does not visit them.
// - A thread's exit flushes its whole cache. Fork keeps only the forking
//   thread's cache (the others' regions are lost with their threads).
// To the arenas, a cached region is allocated: the heap walker and the stats
// stay exact, and runsel_stats reports the cached bytes apart (thread_cached).
//
// What a free into the cache checks, before the region enters it:
// - The chunk registry (a foreign pointer never gets here).
// - The page map entry, the run header and the region's start. The inline
//   path takes the class from the page map's tag and wants the header's bin
//   pointer to be that class's bin (Arena::classify_tagged); anything else
//   goes to push, which classifies as free does under the lock (the keyed
//   check) and lets the uncached free report it.
// - The region's bitmap bit (free: a double free of a region already given
//   back).
// A cached region's first word holds a key: nine times its address
// (arena/freed_key.h). A region queued for its arena by another thread holds the same.
// A free that finds the key looks for the pointer in the caches and aborts if
// it is there (a double free of a region still cached). Then it takes in its
// arena's remote frees, so that the bitmap bit tells a region queued already (a
// double free the uncached free then reports). Popping a region clears the key,
// as does a fill for the region it hands out itself.
// The key is what a write into freed memory (a use after free) can wipe: a
// double free after such a write is not caught while the region is cached (as
// with glibc's tcache), and the region is then handed out twice.
#pragma once

#if RUNSEL_THREAD_CACHE

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "arena/arena.h"
#include "arena/freed_key.h"
#include "arena/large_run_cache.h"
#include "arena/size_classes.h"
#include "platform/assert.h"
#include "platform/fatal.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"

namespace runsel::thread_cache {

inline constexpr std::uint32_t kMinSlots = 20;
// A fill takes at most this many bytes of regions (and at least one region):
// a thread that only allocates (a producer whose consumer frees) holds a
// fill's rest in every class it uses. 4 KiB kept bench_producer_consumer's
// peak RSS at what it was with the small fills (12.6 MiB), where 8 KiB and
// no bound took 13.0 and 13.9.
inline constexpr std::uint32_t kFillBytes = 4096;
inline constexpr std::uint32_t kMaxSlots = 200;
// A grown bound: at most kMaxGrownSlots regions, at most kMaxClassBytes of
// them, and the regions of every class's growth beyond its first bound at
// most kGrowBudget bytes a thread. 1,600-region batches of 16 to 128 B
// (bench_simple_loop) fit: (1600 - 200) * (16 + 32) + (1600 - 128) * 64 +
// (1600 - 64) * 128 bytes, 357 KiB.
inline constexpr std::uint32_t kMaxGrownSlots = 2048;
inline constexpr std::uint32_t kMaxClassBytes = 256 * 1024;
inline constexpr std::size_t kGrowBudget = 512 * 1024;
// The GC gives idle regions back only while the thread holds more than this
// (as TCMalloc scavenges a thread's lists only past its cache's size; 512 KiB
// is its smallest per-thread size): a program that frees batches of a few
// classes in turn (bench_simple_loop) keeps them for the next batch instead
// of flushing and refilling every region once a cycle.
inline constexpr std::size_t kIdleBytes = 512 * 1024;
// Ticks between two GC steps: every class is visited once per about 8,192
// regions moved.
inline constexpr std::uint32_t kGcTicks = 8192 / kNumBins;

// Slots of class `bin`: twice its regions per run, within [kMinSlots, kMaxSlots].
inline std::uint32_t slots_of(std::size_t bin) {
  const std::uint32_t twice = 2 * bin_info(bin).nregs;
  return twice < kMinSlots ? kMinSlots : twice > kMaxSlots ? kMaxSlots : twice;
}

// The most a class's bound can grow to: kMaxGrownSlots regions within
// kMaxClassBytes, never below its first bound.
inline std::uint32_t max_capacity_of(std::size_t bin) {
  std::uint32_t most = kMaxClassBytes / bin_info(bin).size;
  if (most > kMaxGrownSlots) most = kMaxGrownSlots;
  return most < slots_of(bin) ? slots_of(bin) : most;
}

// One class's stack: slots[0 .. count()), the oldest at the bottom, kept as
// three pointers into slots, so that the inline malloc and free compare and
// move one pointer and load no base: top (slots + count), limit (slots + the
// bound, capacity) and low (slots + the low water, the least count since the
// GC's last visit). Written only by the owning thread. Other threads (stats,
// the double-free search) read them with relaxed loads under the caches'
// lock, which the one move of slots (a stack's first growth) also holds, so
// that they never see a top in one array and slots in the other.
// Invariant: slots <= low <= top <= limit, and slots_of(bin) <= capacity() <=
// (ClassState::slots_grown ? max_capacity_of(bin) : slots_of(bin)).
// As large as a BinInfo: a free finds its class's stack at the byte offset of
// its class's BinInfo in the table, with no multiplication.
struct alignas(sizeof(BinInfo)) CacheClass {
  void** top = nullptr;
  void** limit = nullptr;
  void** low = nullptr;
  void** slots = nullptr;

  std::uint32_t count() const { return at(__atomic_load_n(&top, __ATOMIC_RELAXED)); }
  std::uint32_t capacity() const { return at(__atomic_load_n(&limit, __ATOMIC_RELAXED)); }
  std::uint32_t low_water() const { return at(low); }
  // The owner's one store of its top, which other threads load.
  void set_top(void** to) { __atomic_store_n(&top, to, __ATOMIC_RELAXED); }
  void set_count(std::uint32_t n) { set_top(slots + n); }
  void set_capacity(std::uint32_t n) { __atomic_store_n(&limit, slots + n, __ATOMIC_RELAXED); }
  void set_low_water(std::uint32_t n) { low = slots + n; }

 private:
  std::uint32_t at(void* const* slot) const { return static_cast<std::uint32_t>(slot - slots); }
};
static_assert(sizeof(CacheClass) == sizeof(BinInfo));

// What only the fills and the GC read of a class, apart from its stack.
struct ClassState {
  std::uint32_t visited_count = 0;  // count as the GC's last visit left it
  std::uint8_t fill_shift = 1;      // a fill takes capacity >> fill_shift regions
  bool ran_empty = false;           // a miss since the GC's last visit
  bool ran_full = false;            // a full stack since the GC's last visit
  bool slots_grown = false;         // slots has max_capacity_of(bin) entries
};

// Freed large runs of one length (fast profile): runs[0 .. count), the oldest
// at the bottom, each holding its key. count is read by other threads with
// relaxed loads.
inline constexpr std::size_t kLargePages = LargeRunCache::kMaxPages;
inline constexpr std::uint32_t kLargeDepth = 8;
struct LargeStack {
  void* runs[kLargeDepth] = {};
  std::uint32_t count = 0;
};
// Whether a block of `size` usable bytes may be in a thread's stacks of runs.
inline bool large_cacheable(std::size_t size) {
  return kLargeRunCache && !is_small(size) && size <= kLargePages * kPageSize;
}

struct ThreadCache {
  CacheClass classes[kNumBins];
  ClassState state[kNumBins];
  // Ticks left before the next GC step (at least 1).
  std::uint32_t ticks = kGcTicks;
  std::uint32_t gc_next_class = 0;
  // Bytes of regions the grown bounds allow beyond the first ones:
  // sum of (capacity - slots_of(b)) * size, at most kGrowBudget.
  std::size_t grown_bytes = 0;
  // The thread's cached bytes as the GC last saw each class:
  // sum of visited_count * size.
  std::size_t visited_bytes = 0;
  // The chunk of a region the inline free cached, and its arena, when that
  // chunk stays its arena's for the process's life (Arena::keeps_small_chunks):
  // a free into it needs no chunk registry lookup (push_known_chunk). Kept as
  // the chunk's last byte's address (0 while there is none), which no pointer
  // into the first megabyte matches: null is then refused by the same compare.
  std::uintptr_t known_chunk_last = 0;
  Arena* known_owner = nullptr;
  LargeStack large[kLargePages];  // large[i]: runs of i + 1 pages
  // The list of live caches (stats, double-free search, fork), or of free ones.
  ThreadCache* next = nullptr;
  ThreadCache* prev = nullptr;
};

// The calling thread's cache, and whether the inline paths may use it.
struct ThreadSlot {
  ThreadCache* cache = nullptr;
  // Set while the thread has no cache (`cache` null) or is inside a cache
  // operation (enter, leave): the inline malloc and free test this byte alone
  // and leave everything else to the out-of-line paths, which tell the two
  // apart (a signal handler inside an operation, which they report). One
  // test where there were two, the pointer's and a busy flag's in the cache.
  // Only ever stored as a constant: the inline paths' stores do not wait on a
  // load, so one malloc or free never waits for the one before it to have
  // stored.
  std::uint8_t closed = 1;
};
extern constinit thread_local ThreadSlot t_slot;

// A cached region's key: the one a remote-free queue writes too
// (arena/freed_key.h), so that one look at the first word tells a free
// whether the region may be in either.
inline std::uintptr_t key_of(const void* p) { return freed_key_of(p); }

// Out of line (thread_cache.cpp).
// Makes room on the full stack `c` of class `bin`: its bound grows, or its
// older half is flushed. Returns the regions flushed.
std::uint32_t make_room(ThreadCache& cache, CacheClass& c, std::size_t bin);
void gc_step(ThreadCache& cache);
// Where `p` is in a thread's cache (the calling thread's, then every live one).
enum class Cached { kNo, kRegion, kLargeRun };
Cached find_cached(const void* p);
inline bool is_cached(const void* p) { return find_cached(p) != Cached::kNo; }
// Aborts if `p` is in a thread's cache; returns if its key was a coincidence.
void check_not_cached(void* p, const char* function);
// For a region of `owner` whose first word holds the key: aborts if it is in
// a thread's cache, else takes in `owner`'s remote frees, after which its
// bitmap bit says whether it was queued (free) or the key was a coincidence.
void check_not_held(void* p, Arena* owner, const char* function);
// A free from a thread without a cache (a consumer that only frees), which
// then frees the uncached way, which classifies `p` itself: only the key is
// looked at here (`p` is in an arena chunk of `owner`, so its first word can
// be read), since the block may sit in another thread's cache or in its
// arena's remote-free queue.
inline void check_cacheless_free(void* p, Arena* owner, const char* function) {
  if (*static_cast<const std::uintptr_t*>(p) == key_of(p)) check_not_held(p, owner, function);
}
// Flushes the calling thread's cache and stops caching for it (thread exit).
void at_thread_exit();
// Fork: the list lock around fork(); in the child only the caller's cache stays.
void prepare_fork();
void after_fork_in_parent();
void after_fork_in_child();
// Flushes the calling thread's cache, which stays in use.
void flush_own();
// The bytes held by every live cache.
std::size_t cached_bytes();
// The invariants above and, for the calling thread's cache, that every
// region is a live region of its class, keyed, and cached once. False (with
// a line on stderr) when one does not hold.
bool check();

// Around every change of the calling thread's cache (t_slot.cache, not
// null): a signal handler that interrupted one and calls malloc or free finds
// the slot closed and aborts, as the uncached paths do when they find their
// lock held, instead of corrupting the stacks. A cache's stacks are read only
// after the slot is closed.
inline void enter() {
  if (t_slot.closed) [[unlikely]]
    os::fatal_lock_reentered();
  t_slot.closed = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
inline void leave() {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_slot.closed = 0;
}
// `n` ticks, between enter and leave: true when the GC's step is due.
inline bool tick(ThreadCache& cache, std::uint32_t n) {
  if (cache.ticks > n) {
    cache.ticks -= n;
    return false;
  }
  cache.ticks = kGcTicks;
  return true;
}

// The common cases of malloc and free below are inline and call nothing, so
// the entry points that inline them keep their few values in scratch
// registers (no saves and restores); everything rare goes out of line, to
// pop_or_fill and push, which do the whole operation with every case.

// kBinIndexBySixteenths scaled by sizeof(CacheClass): a small size's stack
// is at this byte offset in ThreadCache::classes, one load and no shift.
inline constexpr auto kStackOffsetBySixteenths = [] {
  std::array<std::uint16_t, kBinIndexEntries> table{};
  for (std::size_t i = 0; i < kBinIndexEntries; ++i) {
    table[i] = static_cast<std::uint16_t>(kBinIndexBySixteenths[i] * sizeof(CacheClass));
  }
  return table;
}();

// A region of the class of the small `size` from the cache, or null: then
// the caller calls pop_or_fill (no cache yet, an empty stack, a pop that
// lowers the low water, or a signal handler inside a cache operation, which
// pop_or_fill reports).
[[gnu::always_inline]] inline void* pop_fast(std::size_t size) {
  ThreadSlot& slot = t_slot;
  if (slot.closed) [[unlikely]]
    return nullptr;
  slot.closed = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const std::size_t offset = kStackOffsetBySixteenths[sixteenths(size)];
  CacheClass& c =
      *reinterpret_cast<CacheClass*>(reinterpret_cast<char*>(slot.cache->classes) + offset);
  void** top = c.top;
  // One compare for an empty stack and for a new low water (as jemalloc's
  // cache bins do): low <= top, so an empty stack is at its low water, and a
  // pop from above it leaves it where it is.
  if (top == c.low) [[unlikely]] {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    slot.closed = 0;
    return nullptr;
  }
  --top;
  void* p = *top;
  c.set_top(top);
  *static_cast<std::uintptr_t*>(p) = 0;  // the key: no longer cached
  std::atomic_signal_fence(std::memory_order_seq_cst);
  slot.closed = 0;
  return p;
}

// Out of line: pop_fast's whole operation (the GC step when due), then a
// fill when the stack is empty; null only without a cache for this thread
// or out of memory.
void* pop_or_fill(std::size_t bin);
// The newest freed large run of `pages` pages (1 to kLargePages) the
// thread's cache holds, its key cleared, or null.
void* pop_large(std::size_t pages);

// Caches the free of `p` in `owner`'s chunk when nothing is unusual: true.
// False sends the caller to push, which decides (no cache yet, a full stack,
// a key found in the region, a signal handler inside a cache operation, or
// anything the checks refuse). The same checks as push.
[[gnu::always_inline]] inline bool push_fast(void* p, Chunk* chunk, Arena* owner) {
  ThreadSlot& slot = t_slot;
  // (A signal handler that runs from here to the close below finishes its
  // operation before this one changes anything.)
  if (slot.closed) [[unlikely]]
    return false;
  // Not null while the slot is open, and no handler changes it.
  ThreadCache* const cache = slot.cache;
  const PointerClass target = owner->classify_tagged(chunk, p);
  if (target.run == nullptr) [[unlikely]]
    return false;
  std::uintptr_t* word = static_cast<std::uintptr_t*>(p);
  const std::uintptr_t key = key_of(p);
  if (*word == key) [[unlikely]]
    return false;
  const std::uint64_t bits =
      __atomic_load_n(&target.run->bitmap()[target.region / 64], __ATOMIC_RELAXED);
  if (bits & (std::uint64_t{1} << (target.region % 64))) [[unlikely]]
    return false;
  const std::size_t bin = target.bin;
  slot.closed = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  CacheClass& c = cache->classes[bin];
  void** const top = c.top;
  if (top == c.limit) [[unlikely]] {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    slot.closed = 0;
    return false;
  }
  *word = key;
  *top = p;
  c.set_top(top + 1);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  slot.closed = 0;
  return true;
}
[[gnu::always_inline]] inline bool push_fast(void* p, Arena* owner) {
  return push_fast(p, Chunk::of(p), owner);
}

// The free of `p` when it is in the chunk the thread's last registry-checked
// cached free was in (ThreadCache::known_chunk_last): push_fast without the chunk
// registry's lookup, whose answer for that chunk cannot change. False when `p`
// is elsewhere (null included, so the caller may test for null after) or
// push_fast refuses: the caller goes the registry's way.
[[gnu::always_inline]] inline bool push_known_chunk(void* p) {
  const ThreadSlot& slot = t_slot;
  if (slot.closed) [[unlikely]]
    return false;
  const ThreadCache* cache = slot.cache;
  const std::uintptr_t last = reinterpret_cast<std::uintptr_t>(p) | kChunkMask;
  if (last != cache->known_chunk_last) [[unlikely]]
    return false;
  // The chunk from `last`: its map is then at a constant offset from it.
  Chunk* const chunk = reinterpret_cast<Chunk*>(last - kChunkMask);
  if constexpr (kChecked) {
    const ChunkOwner owner = ChunkRegistry::lookup(p);
    if (!owner.is_arena_chunk() || owner.as<Arena>() != cache->known_owner)
      fatal("checked build: the thread cache's known chunk ", chunk, " is not its arena's");
  }
  return push_fast(p, chunk, cache->known_owner);
}

// After push_fast cached `p` from `owner`'s chunk, found through the registry:
// that chunk becomes the known one if it stays owner's (a small run was in it).
[[gnu::always_inline]] inline void remember_chunk(void* p, Arena* owner) {
  if (!owner->keeps_small_chunks()) return;
  ThreadCache* cache = t_slot.cache;
  cache->known_chunk_last = reinterpret_cast<std::uintptr_t>(p) | kChunkMask;
  cache->known_owner = owner;
}

// Out of line: caches the free of `p` in `owner`'s chunk, with every case
// push_fast leaves to it; false when the caller must free it the uncached
// way (no cache, or anything the checks refuse: the uncached free then
// reports it with its usual message).
bool push(void* p, Arena* owner, std::size_t expected_bin, const char* function);

}  // namespace runsel::thread_cache

#endif  // RUNSEL_THREAD_CACHE
