// Unit tests of a run's bitmap (arena/run.h): Run::take_many, the thread
// cache's fill, against the single take() it stands for, over random
// occupancies of every size class.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "arena/run.h"
#include "arena/size_classes.h"

namespace runsel {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A run of class `bin` in page-aligned memory of its own, every region free.
std::unique_ptr<void, FreeDeleter> new_run(std::size_t bin) {
  const BinInfo& info = kBinInfo[bin];
  void* memory = std::aligned_alloc(kPageSize, info.run_bytes());
  static_cast<Run*>(memory)->init(nullptr, info, RunKey{});
  return std::unique_ptr<void, FreeDeleter>(memory);
}

// Where `region` lies in `run`: two runs compare by offsets.
std::ptrdiff_t offset(const runsel::Run* run, const void* region) {
  return static_cast<const char*>(region) - reinterpret_cast<const char*>(run);
}

// The header and bitmap: everything take() and take_many() change.
std::vector<unsigned char> header_of(const runsel::Run* run, const BinInfo& info) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(run);
  return {bytes, bytes + info.header_bytes};
}

TEST(RunBitmap, TakeManyIsTakeRepeated) {
  std::mt19937_64 random(37);
  for (std::size_t bin = 0; bin < kNumBins; ++bin) {
    const BinInfo& info = kBinInfo[bin];
    for (int trial = 0; trial < 40; ++trial) {
      auto a_memory = new_run(bin);
      auto b_memory = new_run(bin);
      runsel::Run* a = static_cast<runsel::Run*>(a_memory.get());
      runsel::Run* b = static_cast<runsel::Run*>(b_memory.get());
      // The same random occupancy in both: some regions taken, some given back.
      std::vector<std::uint32_t> taken;
      const std::uint32_t steps = static_cast<std::uint32_t>(random() % (2 * info.nregs + 1));
      for (std::uint32_t s = 0; s < steps; ++s) {
        if (a->free_count > 0 && (taken.empty() || random() % 3 != 0)) {
          char* p = static_cast<char*>(a->take(info));
          ASSERT_EQ(offset(b, b->take(info)), offset(a, p));
          taken.push_back(static_cast<std::uint32_t>(
              (p - reinterpret_cast<char*>(a) - info.reg0_offset) / info.size));
        } else if (!taken.empty()) {
          const std::size_t k = random() % taken.size();
          ASSERT_TRUE(a->give(taken[k]));
          ASSERT_TRUE(b->give(taken[k]));
          taken[k] = taken.back();
          taken.pop_back();
        }
      }
      // a: take_many of a random count (sometimes more than are free); b: takes.
      const std::uint32_t wanted = static_cast<std::uint32_t>(random() % (info.nregs + 8));
      std::vector<void*> many(wanted + 1, nullptr);
      const std::uint32_t got = a->take_many(info, many.data(), wanted);
      const std::uint32_t expected_count = wanted < b->free_count ? wanted : b->free_count;
      ASSERT_EQ(got, expected_count) << "bin " << bin << " trial " << trial;
      for (std::uint32_t i = 0; i < got; ++i) {
        ASSERT_EQ(offset(a, many[i]), offset(b, b->take(info)))
            << "bin " << bin << " trial " << trial << " region " << i;
      }
      EXPECT_EQ(many[got], nullptr);
      // The same header and bitmap afterwards: free count, hint, bits.
      ASSERT_EQ(header_of(a, info), header_of(b, info)) << "bin " << bin << " trial " << trial;
      std::uint32_t popcount = 0;
      for (std::uint32_t w = 0; w < info.bitmap_words; ++w)
        popcount += static_cast<std::uint32_t>(__builtin_popcountll(a->bitmap()[w]));
      EXPECT_EQ(popcount, a->free_count);
      for (std::uint32_t w = 0; w < a->first_free_word; ++w) EXPECT_EQ(a->bitmap()[w], 0u);
    }
  }
}

}  // namespace
}  // namespace runsel
