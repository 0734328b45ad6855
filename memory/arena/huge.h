// Huge allocations: bigger than the largest run a chunk holds, each mapped on
// its own as whole chunks, tracked in an address-ordered tree under their own
// lock and registered in the chunk registry for every chunk they cover.
#pragma once

#include <cstddef>
#include <cstdint>

namespace runsel::huge {

// `alignment` is a power of two >= the chunk size. nullptr on failure.
void* allocate(std::size_t size, std::size_t alignment);

enum class Problem { kNone, kDoubleFree, kInterior, kUnknown };

// Frees a huge allocation whose chunk the registry maps to a huge node, or,
// for `registered == false`, reports whether it was a recent double free.
Problem release(void* p);
// Usable size, or 0 with *problem set.
std::size_t usable_size(const void* p, Problem* problem);
// Resizes in place when the mapping allows (same chunks, or shrinking, or
// the address range after it is free). false means: move it.
bool resize_in_place(void* p, std::size_t old_usable, std::size_t new_size);
// Whether `p` was a huge allocation freed recently (for double-free messages).
bool recently_freed(const void* p);

struct Figures {
  std::size_t mapped = 0, allocated = 0, count = 0, nmalloc = 0, nfree = 0;
};
Figures figures();
// Walks the tree and checks it against the counters; false on mismatch.
bool walk_and_compare();

void lock_for_fork();
void unlock_after_fork_in_parent();
void reset_after_fork_in_child();

}  // namespace runsel::huge
