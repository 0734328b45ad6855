// Fixed geometry of the heap: chunk and page sizes (structures/chunk_geometry.h)
// and the size-class boundaries (the chunk header's page count is chunk.h's).
// Everything here is constexpr.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "structures/chunk_geometry.h"

namespace runsel {

// Build switch (-Dclasses48): three more small classes, 5, 6 and 7 KiB, for
// requests of 4,097-7,168 bytes, which otherwise take two whole pages. Off,
// the classes are mozjemalloc's with 4 KiB pages.
#if defined(RUNSEL_CLASSES48) && RUNSEL_CLASSES48
inline constexpr bool kClasses48 = true;
#else
inline constexpr bool kClasses48 = false;
#endif

inline constexpr std::size_t kQuantum = 16;
inline constexpr std::size_t kMaxQuantumClass = 496;  // 16..496 step 16: 31 bins
inline constexpr std::size_t kSubPageStep = 256;
inline constexpr std::size_t kMinSubPageClass = 512;
inline constexpr std::size_t kMaxSubPageClass = 3840;  // 512..3840 step 256: 14 bins
// 5,120..7,168 step 1,024: 3 bins with -Dclasses48, else none. Requests of
// 3,841-4,096 bytes stay one large page (no class between 3,840 and 4,096 could
// hold them in less), so the small sizes have a gap there.
inline constexpr std::size_t kPageClassStep = 1024;
inline constexpr std::size_t kMinPageClass = kPageSize + kPageClassStep;
inline constexpr std::size_t kMaxSmallClass = kClasses48 ? 7168 : kMaxSubPageClass;
inline constexpr std::size_t kNumQuantumBins = kMaxQuantumClass / kQuantum;
inline constexpr std::size_t kNumSubPageBins =
    (kMaxSubPageClass - kMinSubPageClass) / kSubPageStep + 1;
inline constexpr std::size_t kNumPageBins =
    kClasses48 ? (kMaxSmallClass - kMinPageClass) / kPageClassStep + 1 : 0;
inline constexpr std::size_t kNumBins = kNumQuantumBins + kNumSubPageBins + kNumPageBins;
static_assert(kNumBins == (kClasses48 ? 48 : 45));

constexpr std::size_t page_ceiling(std::size_t size) { return (size + kPageMask) & ~kPageMask; }
constexpr std::size_t chunk_ceiling(std::size_t size) { return (size + kChunkMask) & ~kChunkMask; }

// Whether a request (or a usable size) is served by a size class.
constexpr bool is_small(std::size_t size) {
  if constexpr (kClasses48) {
    // The common sizes first: one comparison for them on every malloc (the
    // range test first cost three instructions more in the ring pair loop).
    if (__builtin_expect(size <= kMaxSubPageClass, 1)) return true;
    return size > kPageSize && size <= kMaxSmallClass;
  }
  return size <= kMaxSmallClass;
}

// Bin index for a small size by arithmetic (0 is treated as 1): what the
// table below holds, and the definition the size-class test checks it by.
constexpr std::size_t bin_index_by_formula(std::size_t size) {
  if (size <= kMaxQuantumClass) return size == 0 ? 0 : (size + kQuantum - 1) / kQuantum - 1;
  if (size <= kMinSubPageClass) return kNumQuantumBins;
  if (kClasses48 && size > kPageSize) {
    return kNumQuantumBins + kNumSubPageBins + (size - kPageSize - 1) / kPageClassStep;
  }
  return kNumQuantumBins + (size - kMinSubPageClass + kSubPageStep - 1) / kSubPageStep;
}

// Every class boundary is a multiple of kQuantum, so a size's bin is that of
// the size rounded up to one: a byte per 16 bytes of small sizes (241 bytes,
// 449 with -Dclasses48). On every malloc: a shift and one load instead of
// the formula's compares and branches (five instructions fewer in the ring
// pair loop, callgrind).
inline constexpr std::size_t kBinIndexEntries = kMaxSmallClass / kQuantum + 1;
inline constexpr auto kBinIndexBySixteenths = [] {
  std::array<std::uint8_t, kBinIndexEntries> table{};
  for (std::size_t i = 0; i < kBinIndexEntries; ++i) {
    table[i] = static_cast<std::uint8_t>(bin_index_by_formula(i * kQuantum));
  }
  return table;
}();
static_assert(kNumBins <= 255);

// A small size's entry in the tables by sixteenths (this one and
// thread_cache::kStackOffsetBySixteenths).
constexpr std::size_t sixteenths(std::size_t size) { return (size + kQuantum - 1) / kQuantum; }

// Bin index for a small size (is_small(size); 0 is treated as 1).
constexpr std::size_t bin_index(std::size_t size) {
  return kBinIndexBySixteenths[sixteenths(size)];
}

constexpr std::size_t bin_size(std::size_t index) {
  if (index < kNumQuantumBins) return (index + 1) * kQuantum;
  if (index < kNumQuantumBins + kNumSubPageBins) {
    return kMinSubPageClass + (index - kNumQuantumBins) * kSubPageStep;
  }
  return kMinPageClass + (index - kNumQuantumBins - kNumSubPageBins) * kPageClassStep;
}

}  // namespace runsel
