// The fast profile's cache of freed short large runs (RUNSEL_FAST_PROFILE,
// memory/README.md "Profiles"): per page count 1 to 4, an arena keeps up to
// 32 large allocations its frees gave back, newest on top (at most 1.25 MiB),
// and hands them to the next large malloc of that many pages, under the same
// lock but without the best-fit tree, coalescing or rewriting the page map. A
// faithful library has none: its page runs go back at once, as mozjemalloc's.
//
// To the page map and the stats a cached run stays a large allocation, so the
// heap walker and the stats identity see nothing new (its bytes stay in
// large_allocated; runsel_stats counts them in thread_cached too). Its first word holds the freed
// key (arena/freed_key.h): a free, realloc or malloc_usable_size of a cached run (a double free)
// finds the key and then the run among the at most 32 of its length. As with the thread cache, a
// program that overwrote the first word after the free is not caught. malloc_trim and
// runsel_free_dirty_pages give every cached run back. Invariant: count_[i] <= kDepth; every entry
// of stack i is a large allocation of i + 1 pages of this arena, holding its key, in one stack
// once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "arena/freed_key.h"
#include "structures/chunk_geometry.h"

namespace runsel {

#if defined(RUNSEL_FAST_PROFILE) && RUNSEL_FAST_PROFILE
inline constexpr bool kLargeRunCache = true;
#else
inline constexpr bool kLargeRunCache = false;
#endif

class LargeRunCache {
 public:
  static constexpr std::size_t kMaxPages = 4;
  static constexpr std::size_t kDepth = 32;

  // Caches the run at `p` of `pages` pages; false when it is longer or its
  // stack is full.
  bool push(void* p, std::size_t pages) {
    if (pages > kMaxPages) return false;
    std::uint8_t& n = count_[pages - 1];
    if (n == kDepth) return false;
    *static_cast<std::uintptr_t*>(p) = freed_key_of(p);
    runs_[pages - 1][n++] = p;
    return true;
  }

  // The newest cached run of `pages` pages, its key cleared, or null.
  void* pop(std::size_t pages) {
    if (pages > kMaxPages || count_[pages - 1] == 0) return nullptr;
    void* p = runs_[pages - 1][--count_[pages - 1]];
    *static_cast<std::uintptr_t*>(p) = 0;
    return p;
  }

  // Whether the large allocation at `p` of `pages` pages is cached (freed).
  bool holds(const void* p, std::size_t pages) const {
    if (pages > kMaxPages || *static_cast<const std::uintptr_t*>(p) != freed_key_of(p))
      return false;
    for (std::size_t i = 0; i < count_[pages - 1]; ++i)
      if (runs_[pages - 1][i] == p) return true;
    return false;
  }

  // The bytes of the runs it holds.
  std::size_t bytes() const {
    std::size_t pages = 0;
    for (std::size_t i = 0; i < kMaxPages; ++i) pages += count_[i] * (i + 1);
    return pages * kPageSize;
  }

  // Empties the cache, calling release(p, pages) for every run, oldest first.
  template <class Release>
  void drain(Release release) {
    for (std::size_t i = 0; i < kMaxPages; ++i) {
      for (std::size_t j = 0; j < count_[i]; ++j) release(runs_[i][j], i + 1);
      count_[i] = 0;
    }
  }

 private:
  void* runs_[kMaxPages][kDepth] = {};
  std::uint8_t count_[kMaxPages] = {};
};

// What an arena holds without the cache: nothing (an empty member), so that a
// faithful arena's layout and metadata bytes are those it had before.
class NoLargeRunCache {
 public:
  bool push(void*, std::size_t) { return false; }
  void* pop(std::size_t) { return nullptr; }
  bool holds(const void*, std::size_t) const { return false; }
  std::size_t bytes() const { return 0; }
  template <class Release>
  void drain(Release) {}
};

using ArenaLargeRunCache = std::conditional_t<kLargeRunCache, LargeRunCache, NoLargeRunCache>;

}  // namespace runsel
