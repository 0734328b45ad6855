// Per-bin geometry, computed at compile time: run size, regions per run,
// header and tail bytes, and the reciprocal that turns a region offset into
// an index with a multiply and a shift.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "arena/layout.h"

namespace runsel {

// Bytes of a small run header before its bitmap (checked in run.h): bin
// pointer, free count, first-free-word hint and check value, 16 bytes, as
// mozjemalloc's header (bin, free count, hint); with -Dhook_placement=
// run_header also the 24-byte container hook, 40. With 16, the classic rule
// below gives mozjemalloc 115's run size and regions per run in every class.
#if RUNSEL_HOOKS_IN_PAGE_MAP
inline constexpr std::size_t kRunHeaderFixedBytes = 16;
#else
inline constexpr std::size_t kRunHeaderFixedBytes = 40;
#endif
inline constexpr std::size_t kMaxSmallRunPages = 64;

struct BinInfo {
  std::uint32_t size;          // region size
  std::uint32_t nregs;         // regions per run (>= 2)
  std::uint32_t run_pages;     // run size in pages
  std::uint32_t bitmap_words;  // 64-bit words, one bit per region (1 = free)
  std::uint32_t header_bytes;  // run header + bitmap: bookkeeping
  std::uint32_t reg0_offset;   // regions sit at the end of the run, so power-of-two
                               // sizes are naturally aligned
  std::uint32_t tail_bytes;    // reg0_offset - header_bytes: waste
  std::uint32_t reciprocal;    // floor(2^32 / size) + 1: index = (offset * reciprocal) >> 32

  constexpr std::size_t run_bytes() const { return std::size_t{run_pages} * kPageSize; }
  // Exact for every offset inside a run (proved exhaustively by a unit test).
  constexpr std::uint32_t region_index(std::size_t offset) const {
    return static_cast<std::uint32_t>((offset * reciprocal) >> 32);
  }
  // Whether `offset` (inside a run) is a multiple of the size, from the same
  // product: its low half is what the reciprocal's excess over 2^32 / size
  // added, below the reciprocal for a multiple, at least 2^32 / size for any
  // other offset (proved exhaustively by the same unit test). One compare
  // instead of multiplying the index back.
  constexpr bool is_region_start(std::size_t offset) const {
    return static_cast<std::uint32_t>(offset * reciprocal) < reciprocal;
  }
};

// Above every region index (Run::free_count is 16 bits).
inline constexpr std::uint32_t kNoRegion = 0x10000;

// The index of the region that starts `offset` bytes into a run of a class
// whose first region is `reg0_offset` bytes in, or at least kNoRegion when no
// region starts there. One product for both, in 32 bits: an offset inside
// the header wraps to within a run's length of 2^32, whose quotient (at
// least 599,000 for the largest class and run) is far above any index, and
// region_index and is_region_start hold for the rest (proved for every offset
// of every class at every page count by size_class_test).
// `reciprocal_low` is the reciprocal's low half, which a caller may keep apart
// so that the test reads it from memory instead of from a register copy.
constexpr std::uint32_t region_at(std::uint32_t offset, std::uint32_t reg0_offset,
                                  std::uint64_t reciprocal, std::uint32_t reciprocal_low) {
  const std::uint64_t product = std::uint64_t{offset - reg0_offset} * reciprocal;
  if (static_cast<std::uint32_t>(product) >= reciprocal_low) return kNoRegion;
  return static_cast<std::uint32_t>(product >> 32);
}
constexpr std::uint32_t region_at(std::uint32_t offset, std::uint32_t reg0_offset,
                                  std::uint64_t reciprocal) {
  return region_at(offset, reg0_offset, reciprocal, static_cast<std::uint32_t>(reciprocal));
}

constexpr std::size_t run_header_bytes(std::size_t nregs) {
  return kRunHeaderFixedBytes + 8 * ((nregs + 63) / 64);
}

// The class's geometry for a run of `pages` pages: as many regions as fit after the
// header and bitmap (at least 2, else nregs is 0: not a usable run size), or
// `at_most` when fewer (another allocator's count, whose header is larger).
constexpr BinInfo bin_info_for_pages(std::size_t index, std::size_t pages,
                                     std::size_t at_most = ~std::size_t{0}) {
  const std::size_t size = bin_size(index);
  const std::size_t run = pages * kPageSize;
  std::size_t nregs = run > kRunHeaderFixedBytes ? (run - kRunHeaderFixedBytes) / size : 0;
  while (nregs > 0 && run_header_bytes(nregs) + nregs * size > run) --nregs;
  if (nregs > at_most) nregs = at_most;
  BinInfo info{};
  if (nregs < 2 || nregs > 0xFFFF) return info;  // Run::free_count is 16 bits
  info.size = static_cast<std::uint32_t>(size);
  info.nregs = static_cast<std::uint32_t>(nregs);
  info.run_pages = static_cast<std::uint32_t>(pages);
  info.bitmap_words = static_cast<std::uint32_t>((nregs + 63) / 64);
  info.header_bytes = static_cast<std::uint32_t>(run_header_bytes(nregs));
  info.reg0_offset = static_cast<std::uint32_t>(run - nregs * size);
  info.tail_bytes = info.reg0_offset - info.header_bytes;
  info.reciprocal = static_cast<std::uint32_t>((std::uint64_t{1} << 32) / size + 1);
  return info;
}

// Grows the run page by page until header-plus-tail overhead is at most 1.6 %
// of the run, or 2.4 % when that overhead already exceeds one region (where a
// bigger run cannot do much better), with at least two regions.
constexpr BinInfo compute_bin_info(std::size_t index) {
  const std::size_t size = bin_size(index);
  for (std::size_t pages = 1; pages <= kMaxSmallRunPages; ++pages) {
    const BinInfo info = bin_info_for_pages(index, pages);
    const std::size_t run = pages * kPageSize;
    const std::size_t overhead = info.reg0_offset;  // header, bitmap and tail: run - nregs * size
    const bool good =
        overhead * 1000 <= 16 * run || (overhead > size && overhead * 1000 <= 24 * run);
    if (info.nregs >= 2 && (good || pages == kMaxSmallRunPages)) return info;
  }
  return BinInfo{};
}

constexpr std::array<BinInfo, kNumBins> compute_bin_table() {
  std::array<BinInfo, kNumBins> table{};
  for (std::size_t i = 0; i < kNumBins; ++i) table[i] = compute_bin_info(i);
  return table;
}

inline constexpr std::array<BinInfo, kNumBins> kBinInfo = compute_bin_table();

constexpr bool bin_table_is_sound() {
  for (const BinInfo& info : kBinInfo) {
    if (info.nregs < 2) return false;
    if (std::size_t{info.reg0_offset} * 1000 > 24 * info.run_bytes()) return false;
    if (info.header_bytes > info.reg0_offset) return false;
    if (info.reg0_offset % kQuantum != 0) return false;
    if (info.nregs > 0xFFFF) return false;  // Run::free_count is 16 bits
  }
  return true;
}
static_assert(bin_table_is_sound(), "every class: >= 2 regions, <= 2.4 % overhead");

// The geometry in force: the classic rule's (kBinInfo) unless RUNSEL_CONF's
// run_pages gave every class its run size (the layout of another allocator, such
// as an installed Firefox's; memory/README.md). Written once at start-up, before
// the first arena exists; read everywhere a class's run layout is needed,
// without a lock: nothing writes it once a second thread can run.
inline constinit std::array<BinInfo, kNumBins> g_bin_geometry = kBinInfo;
inline const BinInfo& bin_info(std::size_t index) { return g_bin_geometry[index]; }
inline bool classic_geometry() {
  for (std::size_t i = 0; i < kNumBins; ++i)
    if (g_bin_geometry[i].run_pages != kBinInfo[i].run_pages) return false;
  return true;
}

}  // namespace runsel
