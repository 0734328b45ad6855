// Huge allocations: bigger than the largest run a chunk holds, each mapped on
// its own as whole chunks, tracked in an address-ordered tree under their own
// lock and registered in the chunk registry for every chunk they cover. A freed
// huge mapping is kept in a cache, its touched pages as they are, bounded in
// bytes and in age, and serves a later huge request of up to its size (and at
// least a quarter of it) without a new mmap or page faults.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/base.h"
#include "platform/lock.h"
#include "structures/chunk_registry.h"

namespace runsel::huge {

// Guards the huge allocations' tree, their cache and figures (huge.cpp);
// the registry's huge entries are written under it. Taken after the arenas'
// locks in fork preparation (never while one is held otherwise), before the
// metadata allocator's and the registry's.
extern Lock g_lock RUNSEL_ACQUIRED_BEFORE(base::g_lock, g_registry_lock);

struct CacheLimits {
  std::size_t max_bytes = std::size_t{64} << 20;  // mapped bytes the cache may hold
  std::uint64_t max_age_ns = 1'000'000'000;       // a mapping older than this is unmapped
};
// Sets the cache's limits (at initialisation).
void configure(const CacheLimits& limits);

// `alignment` is a power of two >= the chunk size. nullptr on failure. With
// `zero`, the memory reads as zero (a reused mapping's touched pages are purged).
void* allocate(std::size_t size, std::size_t alignment, bool zero);

enum class Problem {
  kNone,
  kDoubleFree,
  kInterior,
  kUnknown,
  kOverflowPastEnd,  // freed, but a write past its end damaged the next chunk's header
};

// Frees the huge allocation starting at `p`, then returns kOverflowPastEnd if
// it filled its mapping and the arena chunk right after it lost its canary (a
// write past the allocation's end). Otherwise: kInterior if `p` is inside a
// live one, kDoubleFree if one of the recently freed started at `p`, kUnknown
// if neither.
Problem release(void* p);
// Unmaps the cached mappings past their age or the byte limit (all of them
// with `all`); returns the resident bytes they held.
std::size_t release_cached(bool all);
// Usable size, or 0 with *problem set.
std::size_t usable_size(const void* p, Problem* problem);
// Resizes in place when the mapping allows (same chunks, or shrinking, or
// the address range after it is free). false means: move it.
bool resize_in_place(void* p, std::size_t old_usable, std::size_t new_size);
// Whether `p` was a huge allocation freed recently (for double-free messages).
bool recently_freed(const void* p);

// mapped: live mappings; cached_mapped: cached ones; dirty: resident bytes
// past the usable size of live mappings plus the resident bytes of cached ones.
struct Figures {
  std::size_t mapped = 0, allocated = 0, count = 0, nmalloc = 0, nfree = 0;
  std::size_t cached_mapped = 0, dirty = 0, cached = 0, reused = 0;
};
Figures figures();
// Walks the tree and the cache and checks them against the counters; false
// on a mismatch, each written to stderr.
bool walk_and_compare();

void lock_for_fork();
void unlock_after_fork_in_parent();
void reset_after_fork_in_child();

}  // namespace runsel::huge
