// Public allocation API: size classes, alignment, calloc, realloc, edge cases, C++ new/delete.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cerrno>
#include <cstddef>
#include <new>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"

namespace {

using runsel_test::fill_pattern;
using runsel_test::first_mismatch;
using runsel_test::kChunk;
using runsel_test::kNoMismatch;
using runsel_test::kPage;
using runsel_test::mallocs_between;
using runsel_test::opaque;
using runsel_test::snapshot;

constexpr size_t kLargeMax = 252 * kPage;  // 1,032,192 bytes
constexpr size_t kTooBig = size_t{PTRDIFF_MAX} + 1;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Built against a library with the 5, 6 and 7 KiB classes (-Dclasses48).
#if defined(RUNSEL_CLASSES48_BUILD)
constexpr bool kClasses48 = true;
#else
constexpr bool kClasses48 = false;
#endif

// The usable size the contract promises for malloc(n).
size_t expected_usable(size_t n) {
  if (n > size_t{PTRDIFF_MAX}) return 0;
  if (n <= 496) return n == 0 ? 16 : round_up(n, 16);
  if (n <= 3840) return round_up(n, 256);
  if (kClasses48 && n > 4096 && n <= 7168) return round_up(n, 1024);
  return round_up(n, kPage);
}

std::vector<size_t> class_sizes() {
  std::vector<size_t> sizes;
  for (size_t s = 16; s <= 496; s += 16) sizes.push_back(s);
  for (size_t s = 512; s <= 3840; s += 256) sizes.push_back(s);
  if (kClasses48)
    for (size_t s = 5120; s <= 7168; s += 1024) sizes.push_back(s);
  return sizes;
}

bool aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// realloc that the contract says must not move; returns the block either way.
void* expect_in_place(void* p, size_t size) {
  void* q = opaque(realloc(opaque(p), size));
  EXPECT_EQ(q, p) << "realloc to " << size << " moved the block";
  return q ? q : p;
}

size_t first_nonzero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return i;
  return n;
}

TEST(Api, VariantIsTheExpectedContainer) { EXPECT_TRUE(runsel_test::RunsExpectedVariant()); }

TEST(Api, ThisProcessMallocIsRunsel) {
  runsel_stats_t before = snapshot();
  void* p = opaque(malloc(100));
  runsel_stats_t after = snapshot();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(after.allocated - before.allocated, 112u);
  EXPECT_EQ(mallocs_between(before, after), 1u);
  free(p);
  runsel_stats_t freed = snapshot();
  EXPECT_EQ(freed.allocated, before.allocated);
  EXPECT_EQ(freed.nfree - after.nfree, 1u);
}

TEST(Api, GoodSizeIsUsableSizeUpTo16KiB) {
  for (size_t n = 0; n <= 16384; ++n) {
    void* p = opaque(malloc(n));
    ASSERT_NE(p, nullptr) << n;
    size_t usable = malloc_usable_size(p);
    ASSERT_EQ(usable, runsel_good_size(n)) << "n=" << n;
    ASSERT_EQ(usable, expected_usable(n)) << "n=" << n;
    static_cast<char*>(p)[usable - 1] = 1;
    free(p);
  }
}

TEST(Api, GoodSizeIsUsableSizeSampledTo8MiB) {
  std::vector<size_t> sizes = {kLargeMax - 1, kLargeMax, kLargeMax + 1,
                               kChunk - 1,    kChunk,    kChunk + 1};
  for (size_t pages = 4; pages <= 2048; pages += (pages < 300 ? 1 : 7))
    for (size_t delta : {size_t{0}, size_t{1}, kPage - 1}) sizes.push_back(pages * kPage - delta);
  for (size_t n : sizes) {
    void* p = opaque(malloc(n));
    ASSERT_NE(p, nullptr) << n;
    size_t usable = malloc_usable_size(p);
    ASSERT_EQ(usable, runsel_good_size(n)) << "n=" << n;
    ASSERT_EQ(usable, expected_usable(n)) << "n=" << n;
    EXPECT_TRUE(aligned(p, kPage)) << "large and huge blocks are page aligned, n=" << n;
    static_cast<char*>(p)[0] = 1;
    static_cast<char*>(p)[usable - 1] = 1;
    free(p);
  }
  EXPECT_EQ(runsel_good_size(SIZE_MAX), 0u);
  EXPECT_EQ(runsel_good_size(kTooBig), 0u);
}

TEST(Api, EveryClassHasItsSizeAndAlignment) {
  std::vector<size_t> sizes = class_sizes();
  runsel_stats_t s = snapshot();
  ASSERT_EQ(s.bin_count, sizes.size());
  ASSERT_LE(s.bin_count, size_t{RUNSEL_MAX_BINS});
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(s.bins[i].size, sizes[i]) << "bin " << i;
    // A class that is a multiple of a power of two A <= 2048 gives A-aligned regions.
    size_t alignment = sizes[i] & (~sizes[i] + 1);
    if (alignment > 2048) alignment = 2048;
    std::vector<void*> blocks;
    for (int k = 0; k < 40; ++k) {
      void* p = opaque(malloc(sizes[i] - (k % 2 ? 0 : 15)));
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(malloc_usable_size(p), sizes[i]);
      ASSERT_TRUE(aligned(p, alignment)) << p << " class " << sizes[i];
      blocks.push_back(p);
    }
    for (void* p : blocks) free(p);
  }
}

// posix_memalign, aligned_alloc and memalign with every power of two from 8
// bytes to 4 MiB and sizes in the small, large and huge ranges.
TEST(Api, EveryAlignmentFrom8BytesTo4MiB) {
  const size_t sizes[] = {1, 24, 100, 3000, 3840, 5000, 100000, kLargeMax, 1500000, 3 * kChunk + 5};
  for (size_t alignment = 8; alignment <= 4 * kChunk; alignment *= 2) {
    for (size_t size : sizes) {
      for (int api = 0; api < 3; ++api) {
        void* p = nullptr;
        if (api == 0) {
          ASSERT_EQ(posix_memalign(&p, alignment, size), 0) << alignment << " " << size;
        } else if (api == 1) {
          p = aligned_alloc(alignment, size);
        } else {
          p = memalign(alignment, size);
        }
        ASSERT_NE(p, nullptr) << "api " << api << " alignment " << alignment << " size " << size;
        ASSERT_TRUE(aligned(p, alignment))
            << "api " << api << " alignment " << alignment << " size " << size;
        size_t usable = malloc_usable_size(p);
        EXPECT_GE(usable, size);
        static_cast<char*>(p)[0] = 1;
        static_cast<char*>(p)[usable - 1] = 1;
        free(p);
      }
    }
  }
}

TEST(Api, TinyAlignmentsAreHonouredByAlignedAllocAndMemalign) {
  for (size_t alignment : {1, 2, 4}) {
    void* a = aligned_alloc(alignment, 10);
    void* m = memalign(alignment, 10);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(m, nullptr);
    EXPECT_GE(malloc_usable_size(a), 10u);
    free(a);
    free(m);
  }
}

TEST(Api, BadAlignmentsAreRejected) {
  void* sentinel = reinterpret_cast<void*>(0x1234);
  for (size_t alignment : {0, 1, 2, 3, 4, 12, 24, 48, 4097}) {
    void* p = sentinel;
    EXPECT_EQ(posix_memalign(&p, opaque(alignment), 64), EINVAL) << alignment;
    EXPECT_EQ(p, sentinel) << "posix_memalign must not touch *memptr, alignment " << alignment;
  }
  for (size_t alignment :
       {size_t{0}, size_t{3}, size_t{12}, size_t{24}, size_t{48}, size_t{4097}, 3 * kChunk}) {
    errno = 0;
    EXPECT_EQ(aligned_alloc(opaque(alignment), 64), nullptr) << alignment;
    EXPECT_EQ(errno, EINVAL) << alignment;
    errno = 0;
    EXPECT_EQ(memalign(opaque(alignment), 64), nullptr) << alignment;
    EXPECT_EQ(errno, EINVAL) << alignment;
  }
}

TEST(Api, ImpossibleSizesFailWithEnomem) {
  const size_t impossible[] = {SIZE_MAX, SIZE_MAX - kPage + 2, SIZE_MAX - kChunk + 2,
                               kTooBig,  size_t{PTRDIFF_MAX},  size_t{1} << 62};
  for (size_t n : impossible) {
    errno = 0;
    EXPECT_EQ(malloc(opaque(n)), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM) << n;
    errno = 0;
    EXPECT_EQ(aligned_alloc(64, opaque(n)), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM) << n;
    errno = 0;
    EXPECT_EQ(valloc(opaque(n)), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM) << n;
    errno = 0;
    EXPECT_EQ(pvalloc(opaque(n)), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM) << n;
    void* p = nullptr;
    EXPECT_EQ(posix_memalign(&p, 4096, opaque(n)), ENOMEM) << n;
  }
}

TEST(Api, CallocZeroesAndRejectsOverflow) {
  for (size_t n : {0, 1, 16, 100, 496, 3840, 4096, 5000, 300000, 2 * 1000 * 1000}) {
    auto* p = static_cast<unsigned char*>(opaque(calloc(n, 3)));
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(first_nonzero(p, 3 * n), 3 * n) << "size " << 3 * n;
    free(p);
  }
  void* empty = opaque(calloc(0, 0));
  ASSERT_NE(empty, nullptr);
  free(empty);
  struct Pair {
    size_t count, size;
  };
  for (Pair bad : {Pair{SIZE_MAX / 2 + 1, 2}, Pair{size_t{1} << 33, size_t{1} << 33},
                   Pair{2, SIZE_MAX}, Pair{size_t{1} << 31, size_t{1} << 32}, Pair{1, kTooBig}}) {
    errno = 0;
    EXPECT_EQ(calloc(opaque(bad.count), opaque(bad.size)), nullptr)
        << bad.count << " x " << bad.size;
    EXPECT_EQ(errno, ENOMEM);
  }
}

// Recycled regions and pages are dirty; calloc must still hand out zeros, in
// the whole usable size (as glibc does), not only the bytes asked for.
TEST(Api, CallocZeroesRecycledMemory) {
  for (size_t n :
       {size_t{16}, size_t{17}, size_t{48}, size_t{250}, size_t{256}, size_t{1000}, size_t{3700},
        size_t{3840}, size_t{4096}, size_t{20000}, size_t{300000}, 2 * kChunk + 100}) {
    int rounds = n > kLargeMax ? 4 : n > 3840 ? 30 : 100;
    for (int round = 0; round < rounds; ++round) {
      std::vector<void*> dirty;
      for (int k = 0; k < 8; ++k) {
        void* p = opaque(malloc(n));
        memset(p, 0xA5, malloc_usable_size(p));
        dirty.push_back(p);
      }
      for (void* p : dirty) free(p);
      for (int k = 0; k < 8; ++k) {
        auto* z = static_cast<unsigned char*>(opaque(calloc(1, n)));
        ASSERT_NE(z, nullptr);
        const size_t usable = malloc_usable_size(z);
        ASSERT_EQ(first_nonzero(z, usable), usable) << "size " << n << " round " << round;
        dirty[k] = z;
      }
      for (void* p : dirty) free(p);
    }
  }
}

TEST(Api, ReallocKeepsContentsAcrossSmallLargeHugeAndBack) {
  const size_t chain[] = {
      1,          16,      100,       496,           600,        3840,
      5000,       100000,  kLargeMax, kLargeMax + 1, 2 * kChunk, 5 * kChunk + 123,
      3 * kChunk, 500000,  8192,      1000,          40,         16,
      1,          7000000, 24};
  size_t old_size = 0;
  void* p = nullptr;
  uint64_t seed = 1;
  for (size_t size : chain) {
    void* q = opaque(realloc(opaque(p), size));
    ASSERT_NE(q, nullptr) << size;
    EXPECT_EQ(malloc_usable_size(q), runsel_good_size(size));
    size_t kept = old_size < size ? old_size : size;
    ASSERT_EQ(first_mismatch(q, kept, seed), kNoMismatch) << old_size << " -> " << size;
    fill_pattern(q, 0, size, ++seed);
    p = q;
    old_size = size;
  }
  free(p);
}

TEST(Api, ReallocWithinASmallClassStaysInPlace) {
  void* p = opaque(malloc(17));
  fill_pattern(p, 0, 17, 5);
  p = expect_in_place(p, 32);
  p = expect_in_place(p, 20);
  EXPECT_EQ(first_mismatch(p, 17, 5), kNoMismatch);
  free(p);
}

TEST(Api, ReallocOfSmallToAnotherClassMovesAndKeepsContents) {
  void* a = opaque(malloc(64));
  void* b = opaque(malloc(64));
  fill_pattern(a, 0, 64, 7);
  void* moved = opaque(realloc(a, 2000));
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(malloc_usable_size(moved), 2048u);
  EXPECT_EQ(first_mismatch(moved, 64, 7), kNoMismatch);
  free(moved);
  free(b);
}

TEST(Api, LargeReallocShrinksAndGrowsInPlace) {
  void* p = opaque(malloc(256 * 1024));
  fill_pattern(p, 0, 256 * 1024, 9);
  p = expect_in_place(p, 64 * 1024);  // a large shrink is always in place
  EXPECT_EQ(malloc_usable_size(p), 64u * 1024);
  EXPECT_EQ(first_mismatch(p, 64 * 1024, 9), kNoMismatch);
  free(p);

  // Grow in place needs free pages right after the block: a block shrunk in
  // place has them, its old tail. (Two blocks allocated one after the other
  // are adjacent only as the best fit happens to place them: behind the fast
  // profile's caches, whose regions and freed large runs stay allocated between
  // free pages, never in 16 tries after Api.EveryClassHasItsSizeAndAlignment.)
  auto* first = static_cast<char*>(opaque(malloc(464 * 1024)));
  ASSERT_NE(first, nullptr);
  fill_pattern(first, 0, 64 * 1024, 11);
  first = static_cast<char*>(expect_in_place(first, 64 * 1024));
  void* grown = opaque(realloc(opaque(first), 300 * 1024));
  EXPECT_EQ(grown, first) << "the pages after the block were free";
  EXPECT_EQ(malloc_usable_size(grown), 300u * 1024);
  EXPECT_EQ(first_mismatch(grown, 64 * 1024, 11), kNoMismatch);
  free(grown);
}

TEST(Api, HugeReallocWithinTheSameChunkCountStaysInPlace) {
  void* p = opaque(malloc(1500000));
  fill_pattern(p, 0, 1500000, 13);
  p = expect_in_place(p, 2 * kChunk);
  EXPECT_EQ(malloc_usable_size(p), 2 * kChunk);
  p = expect_in_place(p, 1200000);
  EXPECT_EQ(malloc_usable_size(p), round_up(1200000, kPage));
  EXPECT_EQ(first_mismatch(p, 1200000, 13), kNoMismatch);
  void* bigger = opaque(realloc(opaque(p), 3 * kChunk + 1));
  ASSERT_NE(bigger, nullptr);
  EXPECT_EQ(first_mismatch(bigger, 1200000, 13), kNoMismatch);
  free(bigger);
}

TEST(Api, ZeroSizesNullPointersAndRealloc0) {
  void* a = opaque(malloc(0));
  void* b = opaque(malloc(0));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(malloc_usable_size(a), 16u);
  free(a);
  free(b);
  free(nullptr);
  EXPECT_EQ(malloc_usable_size(nullptr), 0u);

  void* r = opaque(realloc(nullptr, 100));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(malloc_usable_size(r), 112u);
  free(r);

  // realloc(p, 0) frees p and returns a minimal allocation.
  void* p = opaque(malloc(1000));
  runsel_stats_t before = snapshot();
  void* minimal = opaque(realloc(opaque(p), 0));
  runsel_stats_t after = snapshot();
  ASSERT_NE(minimal, nullptr);
  EXPECT_EQ(malloc_usable_size(minimal), 16u);
  EXPECT_EQ(after.allocated + 1024, before.allocated + 16) << "realloc(p, 0) must free p";
  free(minimal);
}

TEST(Api, FailedReallocLeavesTheBlockIntact) {
  for (size_t size : {100, 50000, 3000000}) {
    void* p = opaque(malloc(size));
    fill_pattern(p, 0, size, 17);
    for (size_t n : {SIZE_MAX, kTooBig, size_t{1} << 62}) {
      errno = 0;
      EXPECT_EQ(realloc(opaque(p), opaque(n)), nullptr) << size << " -> " << n;
      EXPECT_EQ(errno, ENOMEM);
    }
    EXPECT_EQ(malloc_usable_size(p), runsel_good_size(size));
    EXPECT_EQ(first_mismatch(p, size, 17), kNoMismatch);
    free(p);
  }
}

TEST(Api, Reallocarray) {
  void* p = opaque(reallocarray(nullptr, 4, 8));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(malloc_usable_size(p), 32u);
  fill_pattern(p, 0, 32, 19);
  void* q = opaque(reallocarray(p, 1000, 10));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(malloc_usable_size(q), runsel_good_size(10000));
  EXPECT_EQ(first_mismatch(q, 32, 19), kNoMismatch);
  errno = 0;
  EXPECT_EQ(reallocarray(opaque(q), opaque(SIZE_MAX / 2), 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(reallocarray(opaque(q), opaque(size_t{1} << 32), size_t{1} << 31), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(first_mismatch(q, 32, 19), kNoMismatch)
      << "a failed reallocarray leaves the block valid";
  free(q);
}

TEST(Api, VallocAndPvallocArePageAligned) {
  for (size_t n :
       {size_t{1}, size_t{100}, size_t{4096}, size_t{5000}, size_t{300000}, 2 * kChunk + 1}) {
    void* v = opaque(valloc(n));
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(aligned(v, kPage)) << n;
    EXPECT_GE(malloc_usable_size(v), n);
    free(v);
    void* pv = opaque(pvalloc(n));
    ASSERT_NE(pv, nullptr);
    EXPECT_TRUE(aligned(pv, kPage)) << n;
    EXPECT_EQ(malloc_usable_size(pv), round_up(n, kPage)) << n;
    free(pv);
  }
  void* pv = opaque(pvalloc(0));
  ASSERT_NE(pv, nullptr);
  EXPECT_TRUE(aligned(pv, kPage));
  EXPECT_EQ(malloc_usable_size(pv), kPage);
  free(pv);
}

struct alignas(256) Overaligned {
  char bytes[300];
};

TEST(Api, CxxNewAndDeleteAreServedByRunsel) {
  runsel_stats_t before = snapshot();
  int* one = opaque(new int(5));
  runsel_stats_t after = snapshot();
  EXPECT_EQ(mallocs_between(before, after), 1u);
  EXPECT_EQ(malloc_usable_size(one), 16u);
  delete one;
  EXPECT_EQ(snapshot().nfree - after.nfree, 1u);

  for (size_t n : {size_t{5000}, size_t{700000}, 5 * kChunk}) {
    before = snapshot();
    char* array = opaque(new char[n]);
    after = snapshot();
    EXPECT_EQ(mallocs_between(before, after), 1u) << n;
    EXPECT_EQ(malloc_usable_size(array), runsel_good_size(n));
    array[n - 1] = 1;
    delete[] array;
  }

  before = snapshot();
  Overaligned* over = opaque(new Overaligned[3]);
  after = snapshot();
  EXPECT_EQ(mallocs_between(before, after), 1u);
  EXPECT_TRUE(aligned(over, alignof(Overaligned)));
  delete[] over;

  for (size_t alignment : {size_t{64}, size_t{4096}, kChunk}) {
    before = snapshot();
    void* p = opaque(::operator new(100, std::align_val_t(alignment)));
    after = snapshot();
    EXPECT_EQ(mallocs_between(before, after), 1u);
    EXPECT_TRUE(aligned(p, alignment)) << alignment;
    ::operator delete(p, std::align_val_t(alignment));
  }
}

TEST(Api, CxxNewOfAnImpossibleSizeThrows) {
  EXPECT_THROW(opaque(::operator new(opaque(kTooBig))), std::bad_alloc);
  EXPECT_EQ(::operator new(opaque(kTooBig), std::nothrow), nullptr);
}

}  // namespace
