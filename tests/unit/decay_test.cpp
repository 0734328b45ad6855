// Unit tests of the decay purge schedule (memory/arena/purge.h): what share of
// the dirty pages may stay as they age, on a simulated clock, seeded.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>

#include "arena/purge.h"
#include "support/seeds.h"

namespace runsel {
namespace {

constexpr std::uint64_t kWindow = 1'000'000'000;  // 1 s
constexpr std::uint64_t kEpoch = kWindow / DirtyDecay::kSteps;

TEST(Decay, FreshPagesStayAndOldOnesGoLinearly) {
  DirtyDecay decay;
  std::uint64_t now = 1'000'000;
  decay.dirtied(1000);
  EXPECT_EQ(decay.advance(now, 1000, kWindow), 1000u) << "pages just dirtied all stay";
  // Halfway through the window about half may stay; after it, none.
  const std::size_t half = decay.advance(now + kWindow / 2, 1000, kWindow);
  EXPECT_GE(half, 450u);
  EXPECT_LE(half, 550u);
  EXPECT_EQ(decay.advance(now + kWindow + 2 * kEpoch, 1000, kWindow), 0u);
}

TEST(Decay, SeededSchedulesNeverKeepMoreThanDirtyAndOnlyDecreaseWhenIdle) {
  for (const std::uint64_t seed : runsel_test::test_seeds(20)) {
    SCOPED_TRACE(runsel_test::replay_hint(seed));
    std::mt19937_64 rng(seed);
    DirtyDecay decay;
    std::uint64_t now = 1;
    std::size_t dirty = 0;
    for (int step = 0; step < 2000; ++step) {
      now += rng() % (kEpoch * 3);
      const std::size_t pages = rng() % 64;
      decay.dirtied(pages);
      dirty += pages;
      if (!decay.due(now)) continue;
      const std::size_t allowed = decay.advance(now, dirty, kWindow);
      ASSERT_LE(allowed, dirty);
      dirty = allowed;  // the arena purges down to it
    }
    // Idle from here: what may stay only shrinks, and is gone after the window.
    std::size_t previous = dirty;
    for (std::uint64_t t = now + kEpoch; t <= now + kWindow + 2 * kEpoch; t += kEpoch) {
      const std::size_t allowed = decay.advance(t, previous, kWindow);
      ASSERT_LE(allowed, previous) << "at " << (t - now) / kEpoch << " epochs idle";
      previous = allowed;
    }
    EXPECT_EQ(previous, 0u);
  }
}

}  // namespace
}  // namespace runsel
