// A small run: a header (bin, container hook, free count, hint, bitmap) at the
// start of a page-aligned run, regions packed at its end.
// Invariants: free_count == popcount(bitmap); bits >= nregs are 0; every word
// below first_free_word is 0; the run is in its bin's container exactly when
// 0 < free_count < nregs (an empty run is given back to the arena at once).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/size_classes.h"
#include "containers/hook.h"

namespace runsel {

struct Bin;

struct Run {
  Bin* bin;
  ContainerHook<Run> hook;
  std::uint32_t free_count;
  std::uint32_t first_free_word;

  std::uint64_t* bitmap() {
    return reinterpret_cast<std::uint64_t*>(reinterpret_cast<char*>(this) + kRunHeaderFixedBytes);
  }
  char* region(const BinInfo& info, std::size_t index) {
    return reinterpret_cast<char*>(this) + info.reg0_offset + index * info.size;
  }

  void init(Bin* owner, const BinInfo& info) {
    bin = owner;
    hook = {};
    free_count = info.nregs;
    first_free_word = 0;
    std::uint64_t* words = bitmap();
    for (std::uint32_t w = 0; w < info.bitmap_words; ++w) {
      std::uint32_t bits_here = info.nregs - w * 64;
      words[w] = bits_here >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits_here) - 1;
    }
  }

  // Takes the lowest free region. Requires free_count > 0.
  void* take(const BinInfo& info) {
    std::uint64_t* words = bitmap();
    std::uint32_t w = first_free_word;
    while (words[w] == 0) ++w;
    unsigned bit = static_cast<unsigned>(__builtin_ctzll(words[w]));
    words[w] &= words[w] - 1;
    first_free_word = w;
    --free_count;
    return region(info, std::size_t{w} * 64 + bit);
  }

  // Marks region `index` free; false if it already was (a double free).
  bool give(std::uint32_t index) {
    std::uint64_t* words = bitmap();
    std::uint32_t w = index / 64;
    std::uint64_t mask = std::uint64_t{1} << (index % 64);
    if (words[w] & mask) return false;
    words[w] |= mask;
    ++free_count;
    if (w < first_free_word) first_free_word = w;
    return true;
  }

  bool is_free(std::uint32_t index) {
    return bitmap()[index / 64] & (std::uint64_t{1} << (index % 64));
  }
};

static_assert(sizeof(Run) == kRunHeaderFixedBytes, "size_classes.h assumes this header size");

// How containers reach a run's hook.
struct RunHookAccess {
  static ContainerHook<Run>& hook(Run* run) { return run->hook; }
};

}  // namespace runsel
