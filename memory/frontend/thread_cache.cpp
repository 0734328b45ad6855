// The per-thread cache's slow paths (thread_cache.h): creation, fills,
// flushes, the incremental GC, the double-free search, thread exit and fork.
#include "frontend/thread_cache.h"

#if RUNSEL_THREAD_CACHE

#include <cstring>
#include <new>

#include "arena/base.h"
#include "frontend/frontend.h"
#include "platform/fatal.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"

namespace runsel::thread_cache {

constinit thread_local ThreadSlot t_slot;

namespace {

// Guards the two lists. Taken before any arena's lock
// is (never while one is held), and first in fork preparation.
constinit Lock g_caches_lock;
constinit ThreadCache* g_live RUNSEL_GUARDED_BY(g_caches_lock) = nullptr;
constinit ThreadCache* g_free RUNSEL_GUARDED_BY(g_caches_lock) = nullptr;
// The calling thread will never cache again (it is exiting).
constinit thread_local bool t_retired = false;

void link_live(ThreadCache* cache) RUNSEL_REQUIRES(g_caches_lock) {
  cache->prev = nullptr;
  cache->next = g_live;
  if (g_live != nullptr) g_live->prev = cache;
  g_live = cache;
}

void unlink_live(ThreadCache* cache) RUNSEL_REQUIRES(g_caches_lock) {
  if (cache->prev != nullptr)
    cache->prev->next = cache->next;
  else
    g_live = cache->next;
  if (cache->next != nullptr) cache->next->prev = cache->prev;
}

// A cache from the free list, or a new one in metadata memory (its slots
// with it: one block); every class empty. Null when out of memory.
ThreadCache* new_cache() RUNSEL_REQUIRES(g_caches_lock) {
  ThreadCache* cache = g_free;
  if (cache != nullptr) {
    g_free = cache->next;
  } else {
    std::size_t slots = 0;
    for (std::size_t b = 0; b < kNumBins; ++b) slots += slots_of(b);
    // Metadata memory is 16-byte aligned; the classes want their own
    // alignment (a cache is never given back: nothing needs the block's start).
    constexpr std::size_t kAlign = alignof(ThreadCache);
    static_assert(kAlign >= 16 && kAlign % 16 == 0);
    char* block = static_cast<char*>(
        base::allocate(sizeof(ThreadCache) + slots * sizeof(void*) + kAlign - 16));
    if (block == nullptr) return nullptr;
    block += (kAlign - reinterpret_cast<std::uintptr_t>(block) % kAlign) % kAlign;
    cache = new (block) ThreadCache;
    void** next_slot = reinterpret_cast<void**>(block + sizeof(ThreadCache));
    for (std::size_t b = 0; b < kNumBins; ++b) {
      cache->classes[b].slots = next_slot;
      next_slot += slots_of(b);
    }
  }
  for (std::size_t b = 0; b < kNumBins; ++b) {
    CacheClass& c = cache->classes[b];
    c.set_count(0);
    c.set_low_water(0);
    c.set_capacity(slots_of(b));  // a grown array stays
    cache->state[b] = ClassState{.slots_grown = cache->state[b].slots_grown};
  }
  for (LargeStack& s : cache->large) s.count = 0;
  cache->ticks = kGcTicks;
  cache->visited_bytes = 0;
  cache->gc_next_class = 0;
  __atomic_store_n(&cache->grown_bytes, std::size_t{0}, __ATOMIC_RELAXED);
  cache->known_chunk_last = 0;
  cache->known_owner = nullptr;
  return cache;
}

ThreadCache* create() {
  if (t_retired || thread_arena() == nullptr) return nullptr;
  LockGuard guard(g_caches_lock);
  ThreadCache* cache = new_cache();
  if (cache == nullptr) return nullptr;
  link_live(cache);
  t_slot.cache = cache;
  t_slot.closed = 0;
  return cache;
}

// Frees `count` cached regions: those of the calling thread's arena in one
// batch under its lock, the others queued on their arenas' remote frees, each
// run of consecutive regions of one arena with one compare-and-swap
// (Arena::free_remote_batch). A cached region was checked as free_remote
// checks it when it entered the cache.
// The registry is asked once for each chunk the batch enters, not for each
// region: a region in the chunk of the one before it has the same owner.
void give_back(void** regions, std::size_t count) {
  Arena* own = t_arena;
  Chunk* chunk = nullptr;
  Arena* owner = nullptr;
  auto owner_of = [&](void* p) {
    if (Chunk::of(p) != chunk) {
      chunk = Chunk::of(p);
      owner = ChunkRegistry::lookup(p).as<Arena>();
    }
    return owner;
  };
  std::size_t own_count = 0;
  std::size_t i = 0;
  while (i < count) {
    Arena* const first = owner_of(regions[i]);
    if (first == own) {
      regions[own_count++] = regions[i++];
      continue;
    }
    // Regions [i, j) are first's: queued from where they are, before the
    // own regions after them are moved down over them.
    std::size_t j = i + 1;
    while (j < count && owner_of(regions[j]) == first) ++j;
    first->free_remote_batch(regions + i, j - i);
    i = j;
  }
  if (own_count > 0) own->flush_batch(regions, own_count);
}

// Flushes the `k` oldest regions of class `c`, at most kMaxSlots at a time.
// Each batch leaves the stack before it is given back: a region is never in
// a cache and in its run at once, for another thread's double-free search.
void flush_oldest(CacheClass& c, std::uint32_t k) {
  while (k > 0) {
    const std::uint32_t piece = k < kMaxSlots ? k : kMaxSlots;
    void* batch[kMaxSlots];
    std::memcpy(batch, c.slots, piece * sizeof(void*));
    std::memmove(c.slots, c.slots + piece, (c.count() - piece) * sizeof(void*));
    c.set_count(c.count() - piece);
    if (c.low > c.top) c.low = c.top;
    give_back(batch, piece);
    k -= piece;
  }
}

// The bound of `c` and the cache's grown bytes, which check() reads from
// other threads.
void set_bound(ThreadCache& cache, CacheClass& c, std::uint32_t bound, std::size_t grown_bytes) {
  c.set_capacity(bound);
  __atomic_store_n(&cache.grown_bytes, grown_bytes, __ATOMIC_RELAXED);
}

// Doubles the bound of the full class `c` (of class `bin`), within
// max_capacity_of(bin) and the thread's kGrowBudget; false when it cannot.
// The first growth moves the stack to an array of max_capacity_of(bin)
// slots, kept for the cache's life.
bool grow(ThreadCache& cache, CacheClass& c, std::size_t bin) {
  const std::uint32_t most = max_capacity_of(bin);
  const std::size_t size = bin_info(bin).size;
  const std::size_t room = (kGrowBudget - cache.grown_bytes) / size;
  const std::uint32_t capacity = c.capacity();
  std::uint32_t bound = capacity * 2 < most ? capacity * 2 : most;
  if (bound - capacity > room) bound = capacity + static_cast<std::uint32_t>(room);
  if (bound <= capacity) return false;
  ClassState& state = cache.state[bin];
  if (!state.slots_grown) {
    auto* slots = static_cast<void**>(base::allocate(std::size_t{most} * sizeof(void*)));
    if (slots == nullptr) return false;
    const std::uint32_t count = c.count();
    const std::uint32_t low_water = c.low_water();
    std::memcpy(slots, c.slots, count * sizeof(void*));
    // The other threads read the stack's pointers under this lock.
    LockGuard guard(g_caches_lock);
    c.slots = slots;
    c.set_count(count);
    c.set_low_water(low_water);
    c.set_capacity(capacity);
    __atomic_store_n(&state.slots_grown, true, __ATOMIC_RELAXED);
  }
  set_bound(cache, c, bound, cache.grown_bytes + (bound - capacity) * size);
  return true;
}

// Halves a grown bound of class `c` (of class `bin`), not below its first
// one, flushing the oldest regions above the new bound.
void shrink(ThreadCache& cache, CacheClass& c, std::size_t bin) {
  const std::uint32_t first = slots_of(bin);
  const std::uint32_t capacity = c.capacity();
  const std::uint32_t bound = capacity / 2 > first ? capacity / 2 : first;
  if (c.count() > bound) flush_oldest(c, c.count() - bound);
  set_bound(cache, c, bound, cache.grown_bytes - (capacity - bound) * bin_info(bin).size);
}

// Gives the `k` oldest runs of `s` back through the uncached free: the thread's
// arena's cache of freed runs under its lock, another arena's remote-free
// queue. They leave the stack first, as flush_oldest's regions do.
void flush_large(LargeStack& s, std::uint32_t k) {
  void* batch[kLargeDepth];
  std::memcpy(batch, s.runs, k * sizeof(void*));
  std::memmove(s.runs, s.runs + k, (s.count - k) * sizeof(void*));
  __atomic_store_n(&s.count, s.count - k, __ATOMIC_RELAXED);
  for (std::uint32_t i = 0; i < k; ++i) {
    void* p = batch[i];
    *static_cast<std::uintptr_t*>(p) = 0;  // no longer cached
    Arena* owner = ChunkRegistry::lookup(p).as<Arena>();
    Chunk* chunk = Chunk::of(p);
    const BadPointer problem =
        owner == t_arena ? owner->free(chunk, p) : owner->free_remote(chunk, p);
    if (problem != BadPointer::kNone) fatal_bad_pointer("free", p, chunk, problem);
  }
}

void flush_all(ThreadCache& cache) {
  for (std::size_t b = 0; b < kNumBins; ++b) {
    flush_oldest(cache.classes[b], cache.classes[b].count());
    cache.state[b].visited_count = 0;
  }
  cache.visited_bytes = 0;
  for (LargeStack& s : cache.large) flush_large(s, s.count);
}

bool in_stack(const LargeStack& s, const void* p) {
  const std::uint32_t n = __atomic_load_n(&s.count, __ATOMIC_RELAXED);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (__atomic_load_n(&s.runs[i], __ATOMIC_RELAXED) == p) return true;
  }
  return false;
}

// Another thread's stack is read under g_caches_lock (CacheClass).
bool in_class(const CacheClass& c, const void* p) {
  const std::uint32_t n = c.count();
  void* const* slots = c.slots;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (__atomic_load_n(&slots[i], __ATOMIC_RELAXED) == p) return true;
  }
  return false;
}

// Fills the empty stack `c` of class `bin` from the thread's arena and pops
// the first region taken; null when the arena has none (out of memory). The
// cache is entered. Each region taken is a tick.
void* fill_and_pop_entered(ThreadCache& cache, CacheClass& c, std::size_t bin) {
  ClassState& state = cache.state[bin];
  // A class that runs empty twice between two GC visits is busier than its
  // fill: the fill doubles now (down to half the stack), not at the next
  // visit, which may be thousands of events away. Otherwise a class the GC
  // shrank while idle refills a few regions at a time, each fill a lock and
  // a pick (in bench_simple_loop, 850,000 fills of 2.4 regions on average
  // for 2,000,000 mallocs).
  if (state.ran_empty && state.fill_shift > 1) --state.fill_shift;
  state.ran_empty = true;
  std::uint32_t wanted = c.capacity() >> state.fill_shift;
  const std::uint32_t by_bytes = kFillBytes / bin_info(bin).size;
  if (wanted > by_bytes) wanted = by_bytes;
  if (wanted == 0) wanted = 1;
  const std::size_t got = t_arena->fill_batch(bin, c.slots, wanted);
  if (got == 0) return nullptr;
  // Taken in malloc's order: the first taken goes on top, to be used first.
  for (std::size_t i = 0, j = got - 1; i < j; ++i, --j) {
    void* swap = c.slots[i];
    c.slots[i] = c.slots[j];
    c.slots[j] = swap;
  }
  void* p = c.slots[got - 1];
  c.set_count(static_cast<std::uint32_t>(got - 1));
  // The low water stays 0: the stack ran empty since the GC's last visit. Were it
  // the count after the fill, the GC's next visit would take the fill's
  // unused rest for idle regions, flush them and halve the next fill, and a
  // thread that only allocates (a producer) would shrink its fills to a
  // region or two.
  // A region given back by a flush (or taken from a remote-free queue) still
  // holds its key: cleared as pop_fast clears it, or the program's free of a
  // region it did not overwrite finds the key and searches every cache.
  *static_cast<std::uintptr_t*>(p) = 0;
  if (tick(cache, static_cast<std::uint32_t>(got))) gc_step(cache);
  return p;
}

}  // namespace

// The stack is read only once the cache is entered: a signal handler that
// ran between a look at the count and enter() could have emptied it.
void* pop_or_fill(std::size_t bin) {
  ThreadCache* cache = t_slot.cache;
  if (cache == nullptr) cache = create();
  if (cache == nullptr) return nullptr;
  CacheClass& c = cache->classes[bin];
  enter();
  void* p;
  if (c.top == c.slots) {
    p = fill_and_pop_entered(*cache, c, bin);
  } else {
    // The pop pop_fast leaves here, the one that lowers the low water: no
    // tick, as the inline pops have none.
    void** const top = c.top - 1;
    p = *top;
    c.set_top(top);
    if (top < c.low) c.low = top;
    *static_cast<std::uintptr_t*>(p) = 0;  // the key: no longer cached
  }
  leave();
  return p;
}

void* pop_large(std::size_t pages) {
  ThreadCache* cache = t_slot.cache;
  if (cache == nullptr) return nullptr;
  LargeStack& s = cache->large[pages - 1];
  enter();
  void* p = nullptr;
  if (s.count != 0) {
    p = s.runs[s.count - 1];
    __atomic_store_n(&s.count, s.count - 1, __ATOMIC_RELAXED);
    *static_cast<std::uintptr_t*>(p) = 0;  // the key: no longer cached
  }
  leave();
  return p;
}

namespace {

// push for a live large allocation `target` (classified by classify_live).
bool push_large(ThreadCache* cache, void* p, const PointerClass& target, Arena* owner,
                const char* function) {
  if (!large_cacheable(target.large_size)) return false;
  std::uintptr_t* word = static_cast<std::uintptr_t*>(p);
  // In a cache (a double free: aborts), or queued for its arena or in its
  // arena's cache of freed runs, which the uncached free tells.
  if (*word == key_of(p)) {
    check_not_held(p, owner, function);
    return false;
  }
  LargeStack& s = cache->large[(target.large_size >> kPageShift) - 1];
  enter();
  if (s.count == kLargeDepth) flush_large(s, kLargeDepth / 2);
  *word = key_of(p);
  s.runs[s.count] = p;
  __atomic_store_n(&s.count, s.count + 1, __ATOMIC_RELAXED);
  leave();
  return true;
}

}  // namespace

bool push(void* p, Arena* owner, std::size_t expected_bin, const char* function) {
  ThreadCache* cache = t_slot.cache;
  std::uintptr_t* word = static_cast<std::uintptr_t*>(p);
  if (cache == nullptr) {
    check_cacheless_free(p, owner, function);
    return false;
  }
  const PointerClass target = owner->classify_live(Chunk::of(p), p, expected_bin);
  if (target.problem != BadPointer::kNone) return false;
  if (target.run == nullptr) return push_large(cache, p, target, owner, function);
  if (*word == key_of(p)) check_not_held(p, owner, function);
  // Already free in its run: flushed before (the uncached free reports it).
  const std::uint64_t bits =
      __atomic_load_n(&target.run->bitmap()[target.region / 64], __ATOMIC_RELAXED);
  if (bits & (std::uint64_t{1} << (target.region % 64))) return false;
  const std::size_t bin = target.bin;
  CacheClass& c = cache->classes[bin];
  enter();
  // The free is a tick, as is each region flushed to make room for it.
  std::uint32_t ticks = 1;
  if (c.top == c.limit) ticks += make_room(*cache, c, bin);
  *word = key_of(p);
  *c.top = p;
  c.set_top(c.top + 1);
  if (tick(*cache, ticks)) gc_step(*cache);
  leave();
  return true;
}

// A class full twice between two GC visits frees batches larger than its
// bound: the bound grows (bench_simple_loop's batches of 1,600 regions
// flushed half of a 64-region stack 24 times a batch). Otherwise, or when it
// cannot grow, the older half goes.
std::uint32_t make_room(ThreadCache& cache, CacheClass& c, std::size_t bin) {
  ClassState& state = cache.state[bin];
  if (state.ran_full && grow(cache, c, bin)) return 0;
  state.ran_full = true;
  const std::uint32_t half = c.capacity() / 2;
  flush_oldest(c, half);
  return half;
}

// Idle regions go back only while the thread holds more than kIdleBytes. A
// grown class that was not full since the last visit also halves its bound
// then, when more regions than its first bound stayed unused (the grown part
// held idle regions), or when it is empty and had no miss (unused, it keeps
// none of the thread's budget). A class in use that a batch drains to a
// fill's rest (a low-water mark of a few regions) keeps its grown bound.
void gc_step(ThreadCache& cache) {
  const std::size_t bin = cache.gc_next_class;
  CacheClass& c = cache.classes[bin];
  ClassState& state = cache.state[bin];
  cache.gc_next_class = (cache.gc_next_class + 1) % kNumBins;
  const std::size_t size = bin_info(bin).size;
  const std::size_t held =
      cache.visited_bytes - std::size_t{state.visited_count} * size + std::size_t{c.count()} * size;
  const bool over = held > kIdleBytes;
  const std::uint32_t low_water = c.low_water();
  const bool shrinks = over && c.capacity() > slots_of(bin) && !state.ran_full &&
                       (low_water > slots_of(bin) || (c.count() == 0 && !state.ran_empty));
  if (low_water > 0 && over) {
    flush_oldest(c, low_water - low_water / 4);
    if ((c.capacity() >> (state.fill_shift + 1)) >= 1) ++state.fill_shift;
  } else if (state.ran_empty && state.fill_shift > 1) {
    --state.fill_shift;
  }
  if (shrinks) shrink(cache, c, bin);
  state.ran_empty = state.ran_full = false;
  c.low = c.top;
  cache.visited_bytes = held;
  state.visited_count = c.count();
}

void check_not_cached(void* p, const char* function) {
  // The uncached free's words: the block is free as far as the program is concerned.
  switch (find_cached(p)) {
    case Cached::kNo:
      return;
    case Cached::kRegion:
      fatal_pointer(function, p, "double free of a small region");
    case Cached::kLargeRun:
      fatal_pointer(function, p,
                    "double free of a large allocation (its run is in a thread's cache of freed "
                    "runs)");
  }
}

void check_not_held(void* p, Arena* owner, const char* function) {
  check_not_cached(p, function);
  owner->take_remote_frees_now();
}

namespace {

Cached find_in(const ThreadCache& cache, const void* p) {
  for (const CacheClass& c : cache.classes) {
    if (in_class(c, p)) return Cached::kRegion;
  }
  for (const LargeStack& s : cache.large) {
    if (in_stack(s, p)) return Cached::kLargeRun;
  }
  return Cached::kNo;
}

}  // namespace

Cached find_cached(const void* p) {
  ThreadCache* own = t_slot.cache;
  Cached found = own != nullptr ? find_in(*own, p) : Cached::kNo;
  if (found == Cached::kNo) {
    LockGuard guard(g_caches_lock);
    for (ThreadCache* cache = g_live; cache != nullptr && found == Cached::kNo;
         cache = cache->next) {
      found = find_in(*cache, p);
    }
  }
  return found;
}

void at_thread_exit() {
  t_retired = true;
  ThreadCache* cache = t_slot.cache;
  if (cache == nullptr) return;
  // Mallocs and frees from here on (later destructors, a signal handler
  // during the flush) are uncached, and do not touch `cache`: the slot stays
  // closed.
  enter();
  t_slot.cache = nullptr;
  flush_all(*cache);
  LockGuard guard(g_caches_lock);
  unlink_live(cache);
  cache->next = g_free;
  g_free = cache;
}

void prepare_fork() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_caches_lock.lock(); }

void after_fork_in_parent() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_caches_lock.unlock(); }

// The other threads' caches go with their threads: their regions stay
// allocated (as a dead thread's blocks would), their caches are reused.
void after_fork_in_child() RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  g_caches_lock.reset_in_child();
  ThreadCache* own = t_slot.cache;
  ThreadCache* cache = g_live;
  g_live = nullptr;
  while (cache != nullptr) {
    ThreadCache* next = cache->next;
    if (cache == own) {
      link_live(cache);
    } else {
      cache->next = g_free;
      g_free = cache;
    }
    cache = next;
  }
}

void flush_own() {
  ThreadCache* cache = t_slot.cache;
  if (cache == nullptr) return;
  enter();
  flush_all(*cache);
  leave();
}

std::size_t cached_bytes() {
  std::size_t bytes = 0;
  LockGuard guard(g_caches_lock);
  for (ThreadCache* cache = g_live; cache != nullptr; cache = cache->next) {
    for (std::size_t b = 0; b < kNumBins; ++b) {
      bytes += std::size_t{cache->classes[b].count()} * bin_info(b).size;
    }
    for (std::size_t i = 0; i < kLargePages; ++i) {
      bytes += std::size_t{__atomic_load_n(&cache->large[i].count, __ATOMIC_RELAXED)} * (i + 1) *
               kPageSize;
    }
  }
  return bytes;
}

bool check() {
  bool ok = true;
  {
    LockGuard guard(g_caches_lock);
    for (ThreadCache* cache = g_live; cache != nullptr; cache = cache->next) {
      std::size_t grown = 0;
      for (std::size_t b = 0; b < kNumBins; ++b) {
        const CacheClass& c = cache->classes[b];
        const std::uint32_t n = c.count();
        const std::uint32_t capacity = c.capacity();
        const bool grown_slots = __atomic_load_n(&cache->state[b].slots_grown, __ATOMIC_RELAXED);
        const std::uint32_t most = grown_slots ? max_capacity_of(b) : slots_of(b);
        if (n > capacity || capacity < slots_of(b) || capacity > most) {
          message("check: thread cache ", cache, " class ", b, ": ", n, " regions in ", capacity,
                  " slots (", slots_of(b), " to ", most, ")");
          ok = false;
        }
        grown += (capacity - slots_of(b)) * bin_info(b).size;
      }
      const std::uint32_t ticks = __atomic_load_n(&cache->ticks, __ATOMIC_RELAXED);
      if (ticks == 0 || ticks > kGcTicks) {
        message("check: thread cache ", cache, ": ", ticks, " ticks before a GC step (1 to ",
                kGcTicks, ")");
        ok = false;
      }
      const std::size_t counted = __atomic_load_n(&cache->grown_bytes, __ATOMIC_RELAXED);
      if (grown != counted || grown > kGrowBudget) {
        message("check: thread cache ", cache, ": bounds grown by ", grown, " bytes, counted ",
                counted, ", budget ", kGrowBudget);
        ok = false;
      }
    }
  }
  ThreadCache* own = t_slot.cache;
  if (own == nullptr) return ok;
  for (std::size_t b = 0; b < kNumBins; ++b) {
    const CacheClass& c = own->classes[b];
    if (c.low < c.slots || c.low > c.top) {
      message("check: thread cache class ", b, ": low water ", c.low - c.slots, " outside [0, ",
              c.count(), "]");
      ok = false;
    }
    for (std::uint32_t i = 0; i < c.count(); ++i) {
      void* p = c.slots[i];
      const ChunkOwner owner = ChunkRegistry::lookup(p);
      if (!owner.is_arena_chunk()) {
        message("check: thread cache class ", b, ": ", p, " is not in an arena chunk");
        ok = false;
        continue;
      }
      const PointerClass target = owner.as<Arena>()->classify_live(Chunk::of(p), p, Arena::kAnyBin);
      if (target.problem != BadPointer::kNone || target.run == nullptr ||
          target.info != &bin_info(b) || target.run->is_free(target.region)) {
        message("check: thread cache class ", b, ": ", p, " is not an allocated region of it");
        ok = false;
      }
      // (Freed regions carry the key; those a fill took in do not, nobody
      // having held them: the key cannot be required here.)
      for (std::uint32_t j = 0; j < i; ++j) {
        if (c.slots[j] == p) {
          message("check: thread cache class ", b, ": ", p, " cached twice");
          ok = false;
        }
      }
    }
  }
  for (std::size_t i = 0; i < kLargePages; ++i) {
    const LargeStack& s = own->large[i];
    if (s.count > kLargeDepth || (!kLargeRunCache && s.count != 0)) {
      message("check: thread cache: ", s.count, " runs of ", i + 1, " pages");
      ok = false;
      continue;
    }
    for (std::uint32_t k = 0; k < s.count; ++k) {
      void* p = s.runs[k];
      const ChunkOwner owner = ChunkRegistry::lookup(p);
      const PointerClass target =
          owner.is_arena_chunk() ? owner.as<Arena>()->classify_live(Chunk::of(p), p, Arena::kAnyBin)
                                 : PointerClass{};
      if (!owner.is_arena_chunk() || target.problem != BadPointer::kNone || target.run != nullptr ||
          target.large_size != (i + 1) * kPageSize ||
          *static_cast<const std::uintptr_t*>(p) != key_of(p)) {
        message("check: thread cache: ", p, " is not a keyed large allocation of ", i + 1,
                " pages");
        ok = false;
      }
      for (std::uint32_t j = 0; j < k; ++j) {
        if (s.runs[j] == p) {
          message("check: thread cache: run ", p, " cached twice");
          ok = false;
        }
      }
    }
  }
  return ok;
}

}  // namespace runsel::thread_cache

#endif  // RUNSEL_THREAD_CACHE
