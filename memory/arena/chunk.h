// A chunk: 1 MiB aligned to 1 MiB. It starts with this header (an overflow
// canary, list links, the page map), then a guard page, then usable pages for
// runs. The chunk's arena is not in the header: the chunk registry says it
// (structures/chunk_registry.h), so no write into a chunk header can send a
// free to another arena.
//
// Page map entry bits, per page:
//   small run page:  run header address | kAllocated (see below).
//   large head page: size in bytes      | kAllocated | kLarge.
//   large tail page:                      kAllocated | kLarge (size 0).
//   free page:       [size in bytes at the run's first and last page] | kDirty?
//                    | class tag (every page of the free run: see below).
//   header / guard:  kAllocated | kReserved.
// A small run's first page's entry also holds the run's serial number and,
// with -Dhook_placement=page_map, its container hook (run.h).
//
// The class tag of a free page is 1 + the size class of the last small run
// that held it, or 0 if no small run ever did. Pages keep it for the life of
// the chunk. A tagged page is only ever used again by a run of its own class.
// So a pointer that was the start of a small region of class C, whatever
// happens to its run and chunk, is either free, inside a run of class C, or
// never handed out as the start of a block of another class or of a large
// allocation. That is what lets free() catch a double free after the page was
// given back: a stale pointer can only meet a free page or a region of its own
// class, whose bitmap knows it is free. The price:
// - A small run's pages never go to another class or to a large allocation.
// - A chunk with tagged pages is never unmapped (purged pages cost only
//   address space).
// Invariant: arena.dirty_pages == sum over chunks of ndirty == free pages
// with kDirty set; the first page of each free run (except the spare chunks')
// is in the arena's best-fit tree of its class tag.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/layout.h"
#include "containers/hook.h"
#include "structures/tree_links.h"

namespace runsel {

class Arena;
struct Run;

enum PageBits : std::uintptr_t {
  kAllocated = 1,
  kLarge = 2,
  kDirty = 4,
  kReserved = 8,
};

// Free pages' class tag (see above): bits 4..9, below the size field.
inline constexpr unsigned kClassTagShift = 4;
inline constexpr std::uintptr_t kClassTagMask = std::uintptr_t{0x3f} << kClassTagShift;
inline constexpr std::uintptr_t class_tag_of_bin(std::size_t bin_index) {
  return (bin_index + 1) << kClassTagShift;
}

// What the page map keeps for a small run, in its first page's entry (whose
// free-run links are idle while the run is allocated): its serial number in
// its bin, and, when the hooks are placed in the page map
// (-Dhook_placement=page_map, run.h), its container hook.
struct SmallRunHead {
#if RUNSEL_HOOKS_IN_PAGE_MAP
  ContainerHook<Run> hook;
#endif
  std::uint64_t serial;
};

struct PageMapEntry {
  union {
    TreeLinks<PageMapEntry> avail;  // free run heads: links in a best-fit tree of the arena
    SmallRunHead small;             // small run heads
  };
  std::uintptr_t bits;

  std::size_t size_bytes() const { return bits & ~kPageMask; }
  std::size_t size_pages() const { return size_bytes() >> kPageShift; }
  bool allocated() const { return bits & kAllocated; }
  bool dirty() const { return bits & kDirty; }
  std::uintptr_t class_tag() const { return bits & kClassTagMask; }
};

// The header and its page map are guarded by the owning arena's lock
// (Arena::lock, which the analysis cannot name from here).
struct Chunk {
  // First, where a write past the end of the block before the chunk lands (a
  // huge allocation's or the previous chunk's last large run's): a keyed value
  // that nothing follows, compared with canary_for() when such a block is
  // freed, so that the overflow is reported instead of passing unseen.
  std::uint64_t canary;
  ListLinks<Chunk> in_arena;  // all chunks of the arena, spare ones included
  ListLinks<Chunk> in_dirty;  // chunks with ndirty > 0
  std::size_t ndirty;
  ListLinks<Chunk> in_spares;  // spare chunks (every usable page free), most recent first
  bool in_dirty_list;
  bool spare;
  bool idle;  // nothing allocated, class tags kept: counted in Arena::idle_chunks_
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
  // The canary of the chunk at `address`.
  static std::uint64_t canary_for(const void* address);
};

inline constexpr std::size_t kChunkHeaderPages = page_ceiling(sizeof(Chunk)) / kPageSize;
inline constexpr std::size_t kGuardPages = 1;  // PROT_NONE, never committed
inline constexpr std::size_t kFirstUsablePage = kChunkHeaderPages + kGuardPages;
inline constexpr std::size_t kUsablePages = kPagesPerChunk - kFirstUsablePage;
// The largest run a chunk can hold; anything bigger is a huge allocation.
inline constexpr std::size_t kMaxLargeSize = kUsablePages * kPageSize;
// Both hook placements: the same header pages, so the same usable pages and
// the same addresses (a page map entry is 32 bytes, or 40 with the hooks).
static_assert(kChunkHeaderPages == 3 && kMaxLargeSize == 252 * kPageSize);
static_assert(sizeof(PageMapEntry) == (RUNSEL_HOOKS_IN_PAGE_MAP ? 5 : 4) * sizeof(void*));

}  // namespace runsel
