// A small run: a header (bin, the container hook unless it is in the page
// map, free count, hint, check value, bitmap) at the start of a page-aligned
// run, regions packed at its end.
// Invariants: free_count == popcount(bitmap); bits >= nregs are 0; every word
// below first_free_word is 0; the run is in its bin's container exactly when
// 0 < free_count < nregs (an emptied run is its bin's empty_run, or given
// back to the arena).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/chunk.h"
#include "arena/keyed_check.h"
#include "arena/size_classes.h"
#include "containers/hook.h"
#include "platform/assert.h"
#include "structures/chunk_registry.h"

namespace runsel {

struct Bin;

// The header follows the previous run's last region, so a write past the end
// of that region lands on `bin`. `check` is a keyed check of the bin pointer and
// the run's address (keyed_check.h): free recomputes it before trusting `bin`,
// and a header forged for another bin without the key fails it. `check`
// covers `bin` only; the container links in `hook` are verified by the
// containers before they are followed; `free_count`, `first_free_word` and
// the bitmap are not protected (the heap walker, runsel_check, finds them
// inconsistent). Like all of a chunk, a run header is guarded by its arena's
// lock (Arena::lock: the analysis cannot name another object's lock here).
struct Run {
  Bin* bin;
#if !RUNSEL_HOOKS_IN_PAGE_MAP
  ContainerHook<Run> hook;
#endif
  std::uint16_t free_count;       // <= nregs (size_classes.h checks nregs fits 16 bits)
  std::uint16_t first_free_word;  // < bitmap_words
  std::uint32_t check;            // header_check(bin, this, key)

  std::uint64_t* bitmap() {
    return reinterpret_cast<std::uint64_t*>(reinterpret_cast<char*>(this) + kRunHeaderFixedBytes);
  }
  char* region(const BinInfo& info, std::size_t index) {
    return reinterpret_cast<char*>(this) + info.reg0_offset + index * info.size;
  }

  static std::uint32_t header_check(const Bin* owner, const Run* run, const RunKey& key) {
    return keyed_check32(reinterpret_cast<std::uintptr_t>(owner),
                         reinterpret_cast<std::uintptr_t>(run), key);
  }
  bool header_intact(const RunKey& key) const { return check == header_check(bin, this, key); }

  void init(Bin* owner, const BinInfo& info, const RunKey& key) {
    bin = owner;
    check = header_check(owner, this, key);
#if !RUNSEL_HOOKS_IN_PAGE_MAP
    hook = {};
#endif
    free_count = static_cast<std::uint16_t>(info.nregs);
    first_free_word = 0;
    std::uint64_t* words = bitmap();
    for (std::uint32_t w = 0; w < info.bitmap_words; ++w) {
      std::uint32_t bits_here = info.nregs - w * 64;
      words[w] = bits_here >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits_here) - 1;
    }
  }

  // Takes the lowest free region.
  void* take(const BinInfo& info) {
    RUNSEL_ASSERT(free_count > 0);
    std::uint64_t* words = bitmap();
    std::uint32_t w = first_free_word;
    while (words[w] == 0) ++w;
    unsigned bit = static_cast<unsigned>(__builtin_ctzll(words[w]));
    words[w] &= words[w] - 1;
    first_free_word = static_cast<std::uint16_t>(w);
    --free_count;
    return region(info, std::size_t{w} * 64 + bit);
  }

  // Takes the min(wanted, free_count) lowest free regions into out[], lowest
  // first: what as many take() calls would return, one bitmap word at a time
  // (the thread cache's fills, cache_batches.cpp). Returns how many.
  std::uint32_t take_many(const BinInfo& info, void** out, std::uint32_t wanted) {
    const std::uint32_t n = wanted < free_count ? wanted : free_count;
    std::uint64_t* words = bitmap();
    std::uint32_t w = first_free_word;
    char* const reg0 = reinterpret_cast<char*>(this) + info.reg0_offset;
    std::uint32_t taken = 0;
    while (taken < n) {
      std::uint64_t word = words[w];
      char* const base = reg0 + std::size_t{w} * 64 * info.size;
      while (word != 0 && taken < n) {
        out[taken++] = base + std::size_t(__builtin_ctzll(word)) * info.size;
        word &= word - 1;
      }
      words[w] = word;
      if (word == 0 && taken < n) ++w;
    }
    // As take() leaves it: the word of the last region taken.
    first_free_word = static_cast<std::uint16_t>(w);
    free_count = static_cast<std::uint16_t>(free_count - n);
    return n;
  }

  // Marks region `index` free; false if it already was (a double free).
  bool give(std::uint32_t index) {
    std::uint64_t* words = bitmap();
    std::uint32_t w = index / 64;
    std::uint64_t mask = std::uint64_t{1} << (index % 64);
    if (words[w] & mask) return false;
    words[w] |= mask;
    ++free_count;
    if (w < first_free_word) first_free_word = static_cast<std::uint16_t>(w);
    return true;
  }

  bool is_free(std::uint32_t index) {
    return bitmap()[index / 64] & (std::uint64_t{1} << (index % 64));
  }
};

static_assert(sizeof(Run) == kRunHeaderFixedBytes, "size_classes.h assumes this header size");

// What the containers know of runs (containers/container.h):
// - The node, and where its hook is.
// - Whether a link may be followed.
// - The keys some of them order by: its free regions, its regions in all
//   (from the bin in arena.h), and its serial number.
// - Their side memory: the metadata allocator, never the heap they describe.
// The serial number is kept where the run header has no room: in the page map
// entry of the run's first page, whose free-run tree links are idle while the
// run is allocated. The hook is there too, beside the serial number (chunk.h),
// as mozjemalloc kept its tree nodes; with -Dhook_placement=run_header it is in
// the run header, which is then 24 bytes longer: the one line that differs
// between the placements.
struct RunTraits {
  using Node = Run;
  static SmallRunHead& head(const Run* run) {
    Chunk* chunk = Chunk::of(run);
    return chunk->map[chunk->page_index(run)].small;
  }
  static ContainerHook<Run>& hook(Run* run) {
#if RUNSEL_HOOKS_IN_PAGE_MAP
    return head(run).hook;
#else
    return run->hook;
#endif
  }
  // Whether `neighbour`, a link read from `member`'s hook, is null or the
  // header of a small run of member's bin (arena.h). Called by the containers
  // on the paths that write through links (insert, erase, rebalancing), not
  // on pick() or an unmoved touched().
  static bool linked(const Run* member, const Run* neighbour);
  static std::uint32_t free_regions(const Run* run) { return run->free_count; }
  static std::uint32_t regions(const Run* run);
  static std::uint64_t serial(const Run* run) { return head(run).serial; }
  static void* allocate(std::size_t bytes);
  static void release(void* p, std::size_t bytes);
};

}  // namespace runsel
