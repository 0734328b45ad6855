// Unit tests of the compile-time geometry: size classes, run sizes, the
// multiply-and-shift region index, and the chunk header layout.
#include <gtest/gtest.h>

#include "arena/chunk.h"
#include "arena/run.h"
#include "arena/size_classes.h"

namespace runsel {
namespace {

TEST(SizeClasses, FortyFiveClassesWithTheSpecifiedSpacing) {
  ASSERT_EQ(kNumBins, 45u);
  for (std::size_t i = 0; i < 31; ++i) EXPECT_EQ(bin_size(i), 16 * (i + 1));
  for (std::size_t i = 0; i < 14; ++i) EXPECT_EQ(bin_size(31 + i), 512 + 256 * i);
}

TEST(SizeClasses, EverySizeMapsToTheSmallestClassThatHoldsIt) {
  for (std::size_t size = 0; size <= kMaxSmallClass; ++size) {
    const std::size_t bin = bin_index(size);
    ASSERT_LT(bin, kNumBins) << size;
    ASSERT_GE(bin_size(bin), size == 0 ? 1 : size) << size;
    if (bin > 0) {
      ASSERT_LT(bin_size(bin - 1), size) << size;
    }
  }
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
    // fit beside a 40-byte header and one bitmap bit each, in 64-bit words.
    for (std::size_t pages = 1; pages < info.run_pages; ++pages) {
      const std::size_t run = pages * kPageSize;
      std::size_t nregs = run / info.size;
      while (nregs > 0 && 40 + 8 * ((nregs + 63) / 64) + nregs * info.size > run) --nregs;
      const std::size_t overhead = run - nregs * info.size;
      const bool good =
          overhead * 1000 <= 16 * run || (overhead > info.size && overhead * 1000 <= 24 * run);
      EXPECT_FALSE(nregs >= 2 && good) << pages << " pages would do";
    }
  }
}

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
    }
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
