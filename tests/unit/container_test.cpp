// Every non-full run container, driven the way a bin drives it and compared
// with a reference model of its policy; check() runs after every step.
// Replay one seed: RUNSEL_TEST_SEED=<n>; scale: RUNSEL_STRESS=<k>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "containers/container.h"
#include "containers/hook.h"
#include "containers/rb_first.h"

namespace runsel {
namespace {

// ---- seeds -----------------------------------------------------------------

std::uint64_t stress_multiplier() {
  const char* text = std::getenv("RUNSEL_STRESS");
  const std::uint64_t value = text != nullptr ? std::strtoull(text, nullptr, 0) : 1;
  return value > 0 ? value : 1;
}

// Seeds 1..count*RUNSEL_STRESS, or just RUNSEL_TEST_SEED when it is set.
std::vector<std::uint64_t> test_seeds(std::uint64_t count) {
  if (const char* text = std::getenv("RUNSEL_TEST_SEED")) {
    return {std::strtoull(text, nullptr, 0)};
  }
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t seed = 1; seed <= count * stress_multiplier(); ++seed) seeds.push_back(seed);
  return seeds;
}

std::string replay_hint(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: RUNSEL_TEST_SEED=" + std::to_string(seed) +
         ")";
}

// ---- a fake run header -----------------------------------------------------

struct Run {
  ContainerHook<Run> hook;
  std::uint32_t used = 0;      // regions allocated
  std::uint32_t capacity = 0;  // regions per run
};

struct RunHook {
  static ContainerHook<Run>& hook(Run* run) { return run->hook; }
};

using RbFirst = RbFirstRuns<Run, RunHook>;
static_assert(NonFullRunSet<RbFirst, Run>);

// ---- reference models: what peek() must answer ----------------------------

class LowestAddressModel {
 public:
  void insert(Run* run) { EXPECT_TRUE(members_.insert(address(run)).second); }
  void erase(Run* run) { EXPECT_EQ(members_.erase(address(run)), 1u); }
  void touched(Run*) {}
  std::size_t size() const { return members_.size(); }
  Run* expected_peek() const {
    return members_.empty() ? nullptr : reinterpret_cast<Run*>(*members_.begin());
  }

 private:
  static std::uintptr_t address(Run* run) { return reinterpret_cast<std::uintptr_t>(run); }
  std::set<std::uintptr_t> members_;
};

template <class Set>
struct ModelFor;
template <>
struct ModelFor<RbFirst> {
  using Type = LowestAddressModel;
};

// ---- a bin, reduced to what touches the container --------------------------

template <class Set>
class BinSimulation {
 public:
  explicit BinSimulation(std::uint64_t seed) : rng_(seed) {
    // Most seeds use a few runs; every 10th 1,000 runs, and every 100th
    // 12,000 runs of 4 regions, which at 55% occupancy leaves about 10,000
    // of them non-full.
    std::size_t run_count = 1 + seed % 64;
    std::uint32_t capacity = 1 + rng_() % 8;
    if (seed % 100 == 0) {
      run_count = 12'000;
      capacity = 4;
    } else if (seed % 10 == 0) {
      run_count = 1'000;
    }
    pool_ = std::vector<Run>(run_count);
    for (Run& run : pool_) {
      run.capacity = capacity;
      spare_runs_.push_back(&run);
    }
    // Hand runs out in random address order.
    for (std::size_t i = spare_runs_.size(); i > 1; --i) {
      std::swap(spare_runs_[i - 1], spare_runs_[rng_() % i]);
    }
    max_live_ = run_count * capacity;
  }

  void run() {
    // Fill, free down to a scattered half (most runs non-full), wander, then
    // drain to empty.
    const std::size_t wander_steps = std::min<std::size_t>(pool_.size(), 2'000) / 2 + 64;
    drive_to(max_live_, 80, 2 * max_live_ + 16);
    drive_to(max_live_ * 11 / 20, 98, 2 * max_live_ + 16);
    for (int phase = 0; phase < 2 && !::testing::Test::HasFatalFailure(); ++phase) {
      drive_to(rng_() % (max_live_ + 1), 60, wander_steps);
    }
    drive_to(0, 95, 2 * max_live_ + 64);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(live_.empty()) << "drain did not finish";
    ASSERT_EQ(set_.size(), 0u);
    ASSERT_EQ(set_.peek(), nullptr);
  }

 private:
  // Allocates or frees, moving towards `target` live regions with
  // probability `bias_percent`, for at most `max_steps` steps.
  void drive_to(std::size_t target, unsigned bias_percent, std::size_t max_steps) {
    for (std::size_t step = 0; step < max_steps && live_.size() != target; ++step) {
      const bool toward = rng_() % 100 < bias_percent;
      const bool allocate = (live_.size() < target) == toward;
      if (allocate && live_.size() < max_live_) {
        allocate_region();
      } else if (!live_.empty()) {
        free_region(rng_() % live_.size());
      }
      if (::testing::Test::HasFatalFailure()) return;
      verify(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // The bin's allocation path: use the run peek() names, or start a new one.
  void allocate_region() {
    Run* run = set_.peek();
    if (run == nullptr) {
      ASSERT_FALSE(spare_runs_.empty()) << "no non-full run and no spare run";
      run = spare_runs_.back();
      spare_runs_.pop_back();
      set_.insert(run);
      model_.insert(run);
    }
    ASSERT_LT(run->used, run->capacity) << "peek() returned a full run";
    ++run->used;
    live_.push_back(run);
    if (run->used == run->capacity) {
      set_.erase(run);
      model_.erase(run);
    } else {
      set_.touched(run);
      model_.touched(run);
    }
  }

  // The bin's free path for the region at live_[index].
  void free_region(std::size_t index) {
    Run* run = live_[index];
    live_[index] = live_.back();
    live_.pop_back();
    const bool was_full = run->used == run->capacity;
    --run->used;
    if (run->used == 0) {
      if (!was_full) {
        set_.erase(run);
        model_.erase(run);
      }
      // Released: back to the spares at a random position.
      spare_runs_.push_back(run);
      std::swap(spare_runs_.back(), spare_runs_[rng_() % spare_runs_.size()]);
    } else if (was_full) {
      set_.insert(run);
      model_.insert(run);
    } else {
      set_.touched(run);
      model_.touched(run);
    }
  }

  void verify(std::size_t step) {
    const char* why = "";
    ASSERT_TRUE(set_.check(&why)) << "check() failed at step " << step << ": " << why;
    ASSERT_EQ(set_.size(), model_.size()) << "at step " << step;
    ASSERT_EQ(set_.peek(), model_.expected_peek()) << "at step " << step;
  }

  std::mt19937_64 rng_;
  std::vector<Run> pool_;
  std::vector<Run*> spare_runs_;  // runs not holding any region
  std::vector<Run*> live_;        // one entry per allocated region: its run
  std::size_t max_live_ = 0;
  Set set_;
  typename ModelFor<Set>::Type model_;
};

// ---- the typed tests -------------------------------------------------------

template <class Set>
class NonFullRunsTest : public ::testing::Test {};

using Containers = ::testing::Types<RbFirst>;

struct ContainerName {
  template <class Set>
  static std::string GetName(int) {
    return Set::kName;
  }
};

TYPED_TEST_SUITE(NonFullRunsTest, Containers, ContainerName);

TYPED_TEST(NonFullRunsTest, StartsEmpty) {
  static constinit TypeParam global_set;  // the allocator's bins are constinit
  TypeParam set;
  const char* why = "";
  EXPECT_TRUE(set.check(&why)) << why;
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.peek(), nullptr);
  EXPECT_TRUE(global_set.check(&why)) << why;
  EXPECT_EQ(global_set.peek(), nullptr);
}

TYPED_TEST(NonFullRunsTest, OneRunInAndOut) {
  TypeParam set;
  Run run;
  run.capacity = 2;
  set.insert(&run);
  set.touched(&run);
  const char* why = "";
  EXPECT_TRUE(set.check(&why)) << why;
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.peek(), &run);
  set.erase(&run);
  EXPECT_TRUE(set.check(&why)) << why;
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.peek(), nullptr);
}

TYPED_TEST(NonFullRunsTest, MatchesModelUnderBinTraffic) {
  for (std::uint64_t seed : test_seeds(200)) {
    SCOPED_TRACE(replay_hint(seed));
    BinSimulation<TypeParam>(seed).run();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace runsel
