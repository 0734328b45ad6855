// A chunk: 1 MiB aligned to 1 MiB. It starts with this header (owner, list
// links, the page map), then a guard page, then usable pages for runs.
//
// Page map entry bits, per page:
//   small run page:  run header address | kAllocated (the first page's entry
//                    also holds the run's serial number, see run.h)
//   large head page: size in bytes      | kAllocated | kLarge
//   large tail page:                      kAllocated | kLarge (size 0)
//   free page:       [size in bytes at the run's first and last page] | kDirty?
//   header / guard:  kAllocated | kReserved
// Invariant: arena.dirty_pages == sum over chunks of ndirty == free pages
// with kDirty set; the first page of each free run (except the spare chunks')
// is in the arena's best-fit tree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/layout.h"
#include "structures/tree_links.h"

namespace runsel {

class Arena;

enum PageBits : std::uintptr_t {
  kAllocated = 1,
  kLarge = 2,
  kDirty = 4,
  kReserved = 8,
};

struct PageMapEntry {
  union {
    TreeLinks<PageMapEntry> avail;  // free run heads: links in the arena's best-fit tree
    std::uint64_t run_serial;     // small run heads: the run's serial number in its bin
  };
  std::uintptr_t bits;

  std::size_t size_bytes() const { return bits & ~kPageMask; }
  std::size_t size_pages() const { return size_bytes() >> kPageShift; }
  bool allocated() const { return bits & kAllocated; }
  bool dirty() const { return bits & kDirty; }
};

struct Chunk {
  Arena* arena;
  Chunk* next_in_arena;  // all chunks of the arena, spare ones included
  Chunk* prev_in_arena;
  Chunk* next_dirty;  // chunks with ndirty > 0
  Chunk* prev_dirty;
  std::size_t ndirty;
  Chunk* next_spare;  // spare chunks (every usable page free), most recent first
  bool in_dirty_list;
  bool spare;
  // Allocated pages (small runs and large allocations), and among them the
  // pages of bins' kept empty runs: a chunk whose allocated pages are all
  // kept runs gives them back, so a kept run never holds a chunk on its own.
  std::size_t allocated_pages;
  std::size_t kept_pages;
  PageMapEntry map[kPagesPerChunk];

  static Chunk* of(const void* p) {
    return reinterpret_cast<Chunk*>(reinterpret_cast<std::uintptr_t>(p) & ~kChunkMask);
  }
  std::size_t page_index(const void* p) const {
    return (reinterpret_cast<std::uintptr_t>(p) & kChunkMask) >> kPageShift;
  }
  char* page_address(std::size_t index) {
    return reinterpret_cast<char*>(this) + (index << kPageShift);
  }
  std::size_t index_of(const PageMapEntry* entry) const {
    return static_cast<std::size_t>(entry - map);
  }
};

inline constexpr std::size_t kChunkHeaderPages = page_ceiling(sizeof(Chunk)) / kPageSize;
inline constexpr std::size_t kGuardPages = 1;  // PROT_NONE, never committed
inline constexpr std::size_t kFirstUsablePage = kChunkHeaderPages + kGuardPages;
inline constexpr std::size_t kUsablePages = kPagesPerChunk - kFirstUsablePage;
// The largest run a chunk can hold; anything bigger is a huge allocation.
inline constexpr std::size_t kMaxLargeSize = kUsablePages * kPageSize;
static_assert(kChunkHeaderPages == 3 && kMaxLargeSize == 252 * kPageSize);

}  // namespace runsel
