// Unit tests of the compile-time geometry: size classes, run sizes, the
// multiply-and-shift region index, and the chunk header layout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arena/chunk.h"
#include "arena/run.h"
#include "arena/size_classes.h"

namespace runsel {
namespace {

// Built twice (tests/meson.build): with the default classes, and with the
// 5, 6 and 7 KiB classes of -Dclasses48 (RUNSEL_CLASSES48).
TEST(SizeClasses, TheSpecifiedClassesInOrder) {
  std::vector<std::size_t> expected;
  for (std::size_t size = 16; size <= 496; size += 16) expected.push_back(size);
  for (std::size_t size = 512; size <= 3840; size += 256) expected.push_back(size);
#if defined(RUNSEL_CLASSES48)
  ASSERT_TRUE(kClasses48);
  for (std::size_t size = 5120; size <= 7168; size += 1024) expected.push_back(size);
  ASSERT_EQ(kNumBins, 48u);
  EXPECT_EQ(kMaxSmallClass, 7168u);
#else
  ASSERT_FALSE(kClasses48);
  ASSERT_EQ(kNumBins, 45u);
  EXPECT_EQ(kMaxSmallClass, 3840u);
#endif
  ASSERT_EQ(expected.size(), kNumBins);
  for (std::size_t i = 0; i < kNumBins; ++i) EXPECT_EQ(bin_size(i), expected[i]) << i;
}

// Small: 1..3,840, and with -Dclasses48 also 4,097..7,168. 3,841..4,096 is
// one large page in both: no class could hold such a request in less.
TEST(SizeClasses, ExactlyTheSpecifiedSizesAreSmall) {
  for (std::size_t size = 0; size <= 3 * kPageSize; ++size) {
    const bool small = size <= 3840 || (kClasses48 && size > 4096 && size <= 7168);
    ASSERT_EQ(is_small(size), small) << size;
  }
}

TEST(SizeClasses, EverySizeMapsToTheSmallestClassThatHoldsIt) {
  std::size_t small_sizes = 0;
  for (std::size_t size = 0; size <= kMaxSmallClass; ++size) {
    if (!is_small(size)) continue;
    ++small_sizes;
    const std::size_t bin = bin_index(size);
    ASSERT_EQ(bin, bin_index_by_formula(size)) << size;  // the table is the formula
    ASSERT_LT(bin, kNumBins) << size;
    ASSERT_GE(bin_size(bin), size == 0 ? 1 : size) << size;
    if (bin > 0) {
      ASSERT_LT(bin_size(bin - 1), size) << size;
    }
    // Never more than the pages a large allocation of the size would take.
    ASSERT_LE(bin_size(bin), page_ceiling(size == 0 ? 1 : size)) << size;
  }
  EXPECT_EQ(small_sizes, kClasses48 ? 3841u + 3072u : 3841u);
}

TEST(RunSizes, AtLeastTwoRegionsAndAtMost2Point4PercentOverhead) {
  for (std::size_t i = 0; i < kNumBins; ++i) {
    const BinInfo& info = kBinInfo[i];
    SCOPED_TRACE(info.size);
    EXPECT_EQ(info.size, bin_size(i));
    EXPECT_GE(info.nregs, 2u);
    const double overhead = static_cast<double>(info.reg0_offset) / info.run_bytes();
    EXPECT_LE(overhead, 0.024);
    // Header + bitmap + tail + regions exactly fill the run.
    EXPECT_EQ(info.header_bytes + info.tail_bytes + std::size_t{info.nregs} * info.size,
              info.run_bytes());
    EXPECT_GE(info.bitmap_words * 64u, info.nregs);
    // The run is the smallest page count meeting the 1.6 % rule (2.4 % when
    // the overhead exceeds a region): one page fewer would not. Recomputed
    // here from the rule, not from compute_bin_info: the most regions that
    // fit beside the fixed header and one bitmap bit each, in 64-bit words.
    for (std::size_t pages = 1; pages < info.run_pages; ++pages) {
      const std::size_t run = pages * kPageSize;
      std::size_t nregs = run / info.size;
      while (nregs > 0 && kRunHeaderFixedBytes + 8 * ((nregs + 63) / 64) + nregs * info.size > run)
        --nregs;
      const std::size_t overhead = run - nregs * info.size;
      const bool good =
          overhead * 1000 <= 16 * run || (overhead > info.size && overhead * 1000 <= 24 * run);
      EXPECT_FALSE(nregs >= 2 && good) << pages << " pages would do";
    }
  }
}

#if defined(RUNSEL_CLASSES48)
// What the 1.6 % rule gives the 5, 6 and 7 KiB classes: a region count whose
// run tail, beside the header, is the smallest a page multiple allows
// (1,024, 2,048 and 1,024 bytes).
TEST(RunSizes, ThePageSizedClassesRuns) {
  const BinInfo& five = kBinInfo[45];
  const BinInfo& six = kBinInfo[46];
  const BinInfo& seven = kBinInfo[47];
  EXPECT_EQ(five.size, 5120u);
  EXPECT_EQ(five.run_pages, 19u);
  EXPECT_EQ(five.nregs, 15u);
  EXPECT_EQ(six.size, 6144u);
  EXPECT_EQ(six.run_pages, 32u);
  EXPECT_EQ(six.nregs, 21u);
  EXPECT_EQ(seven.size, 7168u);
  EXPECT_EQ(seven.run_pages, 16u);
  EXPECT_EQ(seven.nregs, 9u);
}
#endif

TEST(RunSizes, PowerOfTwoClassesAreNaturallyAligned) {
  for (const BinInfo& info : kBinInfo) {
    if ((info.size & (info.size - 1)) != 0) continue;
    EXPECT_EQ((info.run_bytes() - info.reg0_offset) % info.size, 0u) << info.size;
    EXPECT_EQ(info.reg0_offset % std::min<std::size_t>(info.size, kPageSize), 0u) << info.size;
  }
}

TEST(RegionIndex, MultiplyAndShiftEqualsDivisionForEveryOffsetInARun) {
  for (const BinInfo& info : kBinInfo) {
    const std::size_t span = std::size_t{info.nregs} * info.size;
    for (std::size_t offset = 0; offset < span; ++offset) {
      ASSERT_EQ(info.region_index(offset), offset / info.size)
          << "size " << info.size << " offset " << offset;
      ASSERT_EQ(info.is_region_start(offset), offset % info.size == 0)
          << "size " << info.size << " offset " << offset;
    }
  }
}

// region_at, the cached free's check (Arena::classify_tagged): the index of
// exactly the offsets where a region starts, and at least kNoRegion for every
// other offset of the run, the header's included (where the 32-bit offset
// wraps). Every offset of every class's run, then, at every page count
// RUNSEL_CONF may give, the whole header and each region's first, second and
// last byte.
TEST(RegionAt, IsTheRegionExactlyWhereOneStarts) {
  const auto expect_at = [](const BinInfo& info, std::uint32_t offset) {
    const std::uint32_t got = region_at(offset, info.reg0_offset, info.reciprocal);
    if (offset >= info.reg0_offset && (offset - info.reg0_offset) % info.size == 0) {
      ASSERT_EQ(got, (offset - info.reg0_offset) / info.size) << "offset " << offset;
    } else {
      ASSERT_GE(got, kNoRegion) << "offset " << offset;
    }
  };
  for (const BinInfo& info : kBinInfo) {
    SCOPED_TRACE(info.size);
    for (std::uint32_t offset = 0; offset < info.run_bytes(); ++offset) {
      ASSERT_NO_FATAL_FAILURE(expect_at(info, offset));
    }
  }
  for (std::size_t i = 0; i < kNumBins; ++i) {
    for (std::size_t pages = 1; pages <= kMaxSmallRunPages; ++pages) {
      const BinInfo info = bin_info_for_pages(i, pages);
      if (info.nregs == 0) continue;
      SCOPED_TRACE(std::to_string(info.size) + " B in " + std::to_string(pages) + " pages");
      for (std::uint32_t offset = 0; offset < info.reg0_offset; ++offset) {
        ASSERT_NO_FATAL_FAILURE(expect_at(info, offset));
      }
      for (std::uint32_t k = 0; k < info.nregs; ++k) {
        const std::uint32_t start = info.reg0_offset + k * info.size;
        ASSERT_NO_FATAL_FAILURE(expect_at(info, start));
        ASSERT_NO_FATAL_FAILURE(expect_at(info, start + 1));
        ASSERT_NO_FATAL_FAILURE(expect_at(info, start + info.size - 1));
      }
    }
  }
}

// RUNSEL_CONF's run_pages (another allocator's layout, e.g. an installed Firefox's):
// a class given the classic rule's page count gets exactly the classic geometry, and
// any other count gets the most regions that fit beside the header, with a region
// index still exact at every region's first and last byte.
TEST(RunGeometry, AtTheClassicPageCountItIsTheClassicGeometry) {
  for (std::size_t i = 0; i < kNumBins; ++i) {
    const BinInfo classic = kBinInfo[i];
    const BinInfo same = bin_info_for_pages(i, classic.run_pages);
    SCOPED_TRACE(classic.size);
    EXPECT_EQ(same.nregs, classic.nregs);
    EXPECT_EQ(same.run_pages, classic.run_pages);
    EXPECT_EQ(same.header_bytes, classic.header_bytes);
    EXPECT_EQ(same.reg0_offset, classic.reg0_offset);
    EXPECT_EQ(same.tail_bytes, classic.tail_bytes);
    EXPECT_EQ(same.reciprocal, classic.reciprocal);
    EXPECT_EQ(same.bitmap_words, classic.bitmap_words);
  }
}

TEST(RunGeometry, AnyPageCountHoldsTheMostRegionsThatFit) {
  for (std::size_t i = 0; i < kNumBins; ++i) {
    for (std::size_t pages = 1; pages <= kMaxSmallRunPages; ++pages) {
      const BinInfo info = bin_info_for_pages(i, pages);
      const std::size_t size = bin_size(i), run = pages * kPageSize;
      SCOPED_TRACE(std::to_string(size) + " B in " + std::to_string(pages) + " pages");
      // The most regions n with header(n) + n * size <= run, counted up from 0.
      std::size_t most = 0;
      while (run_header_bytes(most + 1) + (most + 1) * size <= run) ++most;
      if (most < 2) {
        EXPECT_EQ(info.nregs, 0u);  // not a usable run size: parse_run_pages refuses it
        continue;
      }
      ASSERT_EQ(info.nregs, most);
      EXPECT_EQ(info.run_bytes(), run);
      EXPECT_EQ(info.header_bytes + info.tail_bytes + most * size, run);
      EXPECT_EQ(info.reg0_offset % kQuantum, 0u);
      for (std::size_t k = 0; k < most; ++k) {
        ASSERT_EQ(info.region_index(k * size), k);
        ASSERT_EQ(info.region_index(k * size + size - 1), k);
      }
      // Within a region the product's low half grows by the reciprocal a
      // byte: a region's start, its next byte and its last byte (where the
      // low half could wrap below the reciprocal) are the extremes.
      for (std::size_t k = 0; k < most; ++k) {
        ASSERT_TRUE(info.is_region_start(k * size)) << "region " << k;
        ASSERT_FALSE(info.is_region_start(k * size + 1)) << "region " << k;
        ASSERT_FALSE(info.is_region_start(k * size + size - 1)) << "region " << k;
      }
    }
  }
}

// mozjemalloc 115's run layout, recomputed here from its rule as its source
// states it (arena_bin_t::Init): a 16-byte header (bin, hint, free count) and a
// bitmap of 4-byte words; runs grow a page at a time until header and tail
// are at most 1.6 % of the run, or 2.4 % when they exceed a region, or until
// the bitmap alone reaches the fixed header's size. runsel's classic rule, with
// its own 16-byte header and 8-byte bitmap words, must give the same run size
// and regions per run in every class (the as-built profile's classic geometry).
struct MozjemallocRun {
  std::size_t bytes = 0, regions = 0;
};
MozjemallocRun mozjemalloc115_run(std::size_t size) {
  constexpr std::size_t kFixed = 16;
  MozjemallocRun found;
  for (std::size_t run = kPageSize;; run += kPageSize) {
    std::size_t regions = (run - kFixed) / size + 1, mask_words = 0, offset = 0;
    do {
      --regions;
      mask_words = (regions + 31) / 32;
      offset = run - regions * size;
    } while (kFixed + 4 * mask_words > offset);
    found = {run, regions};
    if (offset * 1000 <= 16 * run) break;
    if (offset > size && offset * 1000 <= 24 * run) break;
    if (mask_words * 4 >= kFixed) break;
  }
  return found;
}

TEST(RunGeometry, TheClassicGeometryIsMozjemalloc115s) {
  if (kRunHeaderFixedBytes != 16) GTEST_SKIP() << "-Dhook_placement=run_header: a 40-byte header";
  for (std::size_t i = 0; i < 45 && i < kNumBins; ++i) {  // mozjemalloc's classes up to 3,840 B
    const MozjemallocRun moz = mozjemalloc115_run(kBinInfo[i].size);
    SCOPED_TRACE(kBinInfo[i].size);
    EXPECT_EQ(kBinInfo[i].run_bytes(), moz.bytes);
    EXPECT_EQ(kBinInfo[i].nregs, moz.regions);
  }
}

// Firefox 153's layout (firefox-esr 153.8.0esr, its own bin statistics:
// size, pages per run, regions per run). Its header is larger than runsel's
// (its list links are in it), so each class's count fits beside runsel's, and
// RUNSEL_CONF=run_pages:PxN gives it exactly (parse_run_pages).
TEST(RunGeometry, FirefoxsRegionsPerRunFitAndAreKept) {
  if (kRunHeaderFixedBytes != 16) GTEST_SKIP() << "-Dhook_placement=run_header: a 40-byte header";
  struct Row {
    std::size_t size, pages, regions;
  };
  constexpr Row kFirefox153[] = {
      {16, 4, 1014}, {32, 4, 509},   {48, 4, 339},  {64, 4, 255},   {80, 4, 204},  {96, 4, 170},
      {112, 4, 145}, {128, 4, 127},  {144, 4, 113}, {160, 4, 102},  {176, 4, 92},  {192, 4, 85},
      {208, 4, 78},  {224, 4, 72},   {240, 4, 68},  {256, 4, 63},   {272, 4, 60},  {288, 4, 56},
      {304, 5, 67},  {320, 4, 51},   {336, 4, 48},  {352, 4, 46},   {368, 4, 44},  {384, 4, 42},
      {400, 5, 51},  {416, 4, 39},   {432, 5, 47},  {448, 4, 36},   {464, 4, 35},  {480, 4, 34},
      {496, 5, 41},  {512, 8, 63},   {768, 4, 21},  {1024, 16, 63}, {1280, 6, 19}, {1536, 8, 21},
      {1792, 4, 9},  {2048, 32, 63}, {2304, 4, 7},  {2560, 12, 19}, {2816, 9, 13}, {3072, 16, 21},
      {3328, 9, 11}, {3584, 8, 9},   {3840, 16, 17}};
  for (std::size_t i = 0; i < 45 && i < kNumBins; ++i) {
    const Row& row = kFirefox153[i];
    SCOPED_TRACE(row.size);
    ASSERT_EQ(bin_size(i), row.size);
    const BinInfo info = bin_info_for_pages(i, row.pages, row.regions);
    EXPECT_EQ(info.nregs, row.regions);
    EXPECT_EQ(info.run_pages, row.pages);
    EXPECT_LE(info.header_bytes, info.reg0_offset);
  }
}

TEST(ChunkLayout, HeaderGuardAndLargestRun) {
  EXPECT_EQ(kChunkSize, 1u << 20);
  EXPECT_EQ(kPageSize, 4096u);
  EXPECT_LE(sizeof(Chunk), kChunkHeaderPages * kPageSize);
  EXPECT_EQ(kFirstUsablePage, kChunkHeaderPages + 1);
  EXPECT_EQ(kMaxLargeSize, (kPagesPerChunk - kFirstUsablePage) * kPageSize);
  EXPECT_EQ(sizeof(runsel::Run), kRunHeaderFixedBytes);
}

}  // namespace
}  // namespace runsel
