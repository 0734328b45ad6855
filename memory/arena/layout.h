// Fixed geometry of the heap: chunk and page sizes, the chunk header's page
// count, and the size-class boundaries. Everything here is constexpr.
#pragma once

#include <cstddef>
#include <cstdint>

namespace runsel {

inline constexpr std::size_t kPageShift = 12;
inline constexpr std::size_t kPageSize = std::size_t{1} << kPageShift;
inline constexpr std::size_t kPageMask = kPageSize - 1;
inline constexpr std::size_t kChunkShift = 20;
inline constexpr std::size_t kChunkSize = std::size_t{1} << kChunkShift;
inline constexpr std::size_t kChunkMask = kChunkSize - 1;
inline constexpr std::size_t kPagesPerChunk = kChunkSize / kPageSize;

inline constexpr std::size_t kQuantum = 16;
inline constexpr std::size_t kMaxQuantumClass = 496;  // 16..496 step 16: 31 bins
inline constexpr std::size_t kSubPageStep = 256;
inline constexpr std::size_t kMinSubPageClass = 512;
inline constexpr std::size_t kMaxSmallClass = 3840;  // 512..3840 step 256: 14 bins
inline constexpr std::size_t kNumQuantumBins = kMaxQuantumClass / kQuantum;
inline constexpr std::size_t kNumBins =
    kNumQuantumBins + (kMaxSmallClass - kMinSubPageClass) / kSubPageStep + 1;
static_assert(kNumBins == 45);

constexpr std::size_t page_ceiling(std::size_t size) { return (size + kPageMask) & ~kPageMask; }
constexpr std::size_t chunk_ceiling(std::size_t size) { return (size + kChunkMask) & ~kChunkMask; }

// Bin index for a small size (1..kMaxSmallClass; 0 is treated as 1).
constexpr std::size_t bin_index(std::size_t size) {
  if (size <= kMaxQuantumClass) return size == 0 ? 0 : (size + kQuantum - 1) / kQuantum - 1;
  if (size <= kMinSubPageClass) return kNumQuantumBins;
  return kNumQuantumBins + (size - kMinSubPageClass + kSubPageStep - 1) / kSubPageStep;
}

constexpr std::size_t bin_size(std::size_t index) {
  return index < kNumQuantumBins ? (index + 1) * kQuantum
                                 : kMinSubPageClass + (index - kNumQuantumBins) * kSubPageStep;
}

}  // namespace runsel
