// Every non-full run container, driven the way a bin drives it and by random
// operations, compared with a reference model of its policy; check() runs
// after every step. Replay one seed: RUNSEL_TEST_SEED=<n>; scale:
// RUNSEL_STRESS=<k>. meson runs each container's cases in its own suite
// (--gtest_filter=*/<container>.*); run the binary alone for all of them.
#include "containers/container.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "containers/hook.h"
#include "containers/list.h"
#include "support/seeds.h"

namespace runsel {
namespace {

// ---- seeds -----------------------------------------------------------------

using runsel_test::replay_hint;
using runsel_test::test_seeds;

// ---- a fake run header -----------------------------------------------------

struct Run {
  ContainerHook<Run> hook;
  std::uint32_t used = 0;      // regions allocated
  std::uint32_t capacity = 0;  // regions per run
  std::uint64_t serial = 0;    // order of creation (age_address)
  std::size_t slot = 0;        // RandomOperations: position in its members/outsiders list
};

// The traits of the fake runs (containers/container.h), with the side memory
// `Memory` gives (array_heap's array).
template <class Memory>
struct RunTraits : Memory {
  using Node = Run;
  static ContainerHook<Run>& hook(Run* run) { return run->hook; }
  // Every link is taken for a node of the set: the containers' back-link
  // checks still run on every call (and must never fire on a valid set).
  static bool linked(const Run*, const Run*) { return true; }
  static std::uint32_t free_regions(const Run* run) { return run->capacity - run->used; }
  static std::uint32_t regions(const Run* run) { return run->capacity; }
  static std::uint64_t serial(const Run* run) { return run->serial; }
};

// Side memory for array_heap's array: glibc's malloc (unit tests do not run
// on runsel), counting what is outstanding.
struct CountingMemory {
  static inline std::size_t calls = 0;
  static inline std::size_t live_bytes = 0;
  static void* allocate(std::size_t bytes) {
    ++calls;
    live_bytes += bytes;
    return std::malloc(bytes);
  }
  static void release(void* p, std::size_t bytes) {
    live_bytes -= bytes;
    std::free(p);
  }
};

// Side memory that has none left.
struct NoMemory {
  static void* allocate(std::size_t) { return nullptr; }
  static void release(void*, std::size_t) {}
};

using RunHook = RunTraits<CountingMemory>;

// ---- reference models: what pick() must answer ----------------------------
// expected_pick() is called exactly when the container's pick() is.

std::uintptr_t address(const Run* run) { return reinterpret_cast<std::uintptr_t>(run); }

// Members ordered by a key, then address; the pick is the smallest. KeyOf
// computes a run's key when it is inserted and again when it is touched
// (given the key it had).
using Key = std::pair<std::uint64_t, std::uint64_t>;

template <class KeyOf>
class KeyedModel {
 public:
  void insert(Run* run) {
    const Key key = key_of_.inserted(run);
    EXPECT_TRUE(key_.emplace(run, key).second);
    order_.emplace(key, address(run));
  }
  void erase(Run* run) {
    auto found = key_.find(run);
    ASSERT_NE(found, key_.end());
    EXPECT_EQ(order_.erase({found->second, address(run)}), 1u);
    key_.erase(found);
  }
  void touched(Run* run) {
    auto found = key_.find(run);
    ASSERT_NE(found, key_.end());
    const Key key = key_of_.touched(run, found->second);
    if (key == found->second) return;
    order_.erase({found->second, address(run)});
    order_.emplace(key, address(run));
    found->second = key;
  }
  std::size_t size() const { return key_.size(); }
  template <class Set>
  Run* expected_pick(const Set&) {
    return order_.empty() ? nullptr : reinterpret_cast<Run*>(order_.begin()->second);
  }

 private:
  KeyOf key_of_;
  std::unordered_map<Run*, Key> key_;
  std::set<std::pair<Key, std::uintptr_t>> order_;
};

// Address alone.
struct NoKey {
  Key inserted(Run*) { return {0, 0}; }
  Key touched(Run*, Key had) { return had; }
};
using LowestAddressModel = KeyedModel<NoKey>;

// Free regions now, then address.
struct FreeRegionsKey {
  Key inserted(Run* run) { return {run->capacity - run->used, 0}; }
  Key touched(Run* run, Key) { return inserted(run); }
};
using FewestFreeModel = KeyedModel<FreeRegionsKey>;

// Serial number, then address.
struct SerialKey {
  Key inserted(Run* run) { return {run->serial, 0}; }
  Key touched(Run*, Key had) { return had; }
};
using OldestModel = KeyedModel<SerialKey>;

// Occupancy bucket (fullest first: 7 for 0 or 1 region allocated, 6 for 2-3,
// 5 for 4-7, ..., 0 for 128 or more), then the run that entered its bucket
// last: a stamp taken at insert and whenever touched changes the bucket.
struct BucketKey {
  static std::uint64_t bucket(const Run* run) {
    std::uint64_t width = 0;
    while (width < 32 && (run->used >> width) != 0) ++width;
    if (width == 0) return 7;
    return width >= 8 ? 0 : 8 - width;
  }
  Key inserted(Run* run) { return {bucket(run), ~stamp++}; }
  Key touched(Run* run, Key had) { return bucket(run) == had.first ? had : inserted(run); }
  std::uint64_t stamp = 0;
};
using FullestBucketModel = KeyedModel<BucketKey>;

class MostRecentModel {
 public:
  void insert(Run* run) {
    EXPECT_TRUE(stamp_of_.emplace(run, next_stamp_).second);
    by_stamp_.emplace(next_stamp_++, run);
  }
  void erase(Run* run) {
    auto found = stamp_of_.find(run);
    ASSERT_NE(found, stamp_of_.end());
    by_stamp_.erase(found->second);
    stamp_of_.erase(found);
  }
  void touched(Run*) {}  // a free or allocation does not move a run
  std::size_t size() const { return stamp_of_.size(); }
  template <class Set>
  Run* expected_pick(const Set&) {
    return by_stamp_.empty() ? nullptr : by_stamp_.rbegin()->second;
  }

 private:
  std::uint64_t next_stamp_ = 0;
  std::map<std::uint64_t, Run*> by_stamp_;  // insertion order
  std::unordered_map<Run*, std::uint64_t> stamp_of_;
};

// "Sticky until erased, else the tree's root". The root comes from the
// container (a test accessor; the model has no tree), but the model checks it
// is a member and remembers the pick itself, so a container that forgot its
// pick and answered the current root would differ as soon as the tree rotates.
class StickyRootModel {
 public:
  void insert(Run* run) { EXPECT_TRUE(members_.insert(run).second); }
  void erase(Run* run) {
    EXPECT_EQ(members_.erase(run), 1u);
    if (run == current_) current_ = nullptr;
  }
  void touched(Run*) {}
  std::size_t size() const { return members_.size(); }
  template <class Set>
  Run* expected_pick(const Set& set) {
    if (current_ == nullptr && !members_.empty()) {
      current_ = set.root();
      EXPECT_EQ(members_.count(current_), 1u) << "the tree's root is not a member";
    }
    return current_;
  }

 private:
  std::set<Run*> members_;
  Run* current_ = nullptr;
};

// mozjemalloc's current run and tree (containers/moz_tree.h), written as its
// rules read, over a std::set: pick() keeps a non-full current run, else
// takes the lowest tree run out of the tree; a run that fills while current
// stays current, full, until the next pick; a reopened run becomes current
// when there is none (whatever its address) or when it is below the current
// run (which goes into the tree unless full), else joins the tree.
class CurrentThenLowestModel {
 public:
  void insert(Run* run) {
    if (run == current_) {
      current_full_ = false;
    } else if (current_ == nullptr) {
      current_ = run;
    } else if (address(run) < address(current_)) {
      if (!current_full_) EXPECT_TRUE(tree_.insert(current_).second);
      current_ = run;
      current_full_ = false;
    } else {
      EXPECT_TRUE(tree_.insert(run).second);
    }
  }
  void erase(Run* run) {
    if (run != current_) {
      EXPECT_EQ(tree_.erase(run), 1u);
    } else if (run->used == run->capacity) {
      current_full_ = true;
    } else {
      current_ = nullptr;
    }
  }
  void touched(Run*) {}
  std::size_t size() const { return tree_.size() + (current_ != nullptr && !current_full_); }
  template <class Set>
  Run* expected_pick(const Set&) {
    if (current_ != nullptr && !current_full_) return current_;
    current_full_ = false;
    current_ = tree_.empty() ? nullptr : *tree_.begin();
    if (current_ != nullptr) tree_.erase(tree_.begin());
    return current_;
  }

 private:
  struct ByAddress {
    bool operator()(const Run* a, const Run* b) const { return address(a) < address(b); }
  };
  std::set<Run*, ByAddress> tree_;
  Run* current_ = nullptr;
  bool current_full_ = false;
};

// ---- one case per container ------------------------------------------------

// The reference model of each policy (containers/list.h's Picks).
template <Picks>
struct ModelFor;
template <>
struct ModelFor<Picks::lowest_address> {
  using type = LowestAddressModel;
};
template <>
struct ModelFor<Picks::most_recent> {
  using type = MostRecentModel;
};
template <>
struct ModelFor<Picks::sticky_root> {
  using type = StickyRootModel;
};
template <>
struct ModelFor<Picks::fullest_bucket_recent> {
  using type = FullestBucketModel;
};
template <>
struct ModelFor<Picks::fewest_free_lowest> {
  using type = FewestFreeModel;
};
template <>
struct ModelFor<Picks::oldest_lowest> {
  using type = OldestModel;
};
template <>
struct ModelFor<Picks::current_then_lowest> {
  using type = CurrentThenLowestModel;
};

template <class Entry>
struct Case {
  template <class Memory>
  using With = typename Entry::template Type<RunTraits<Memory>>;
  using Set = With<CountingMemory>;
  using Model = typename ModelFor<Entry::kPicks>::type;
  static constexpr Picks kPicks = Entry::kPicks;
  static constexpr const char* kName = Entry::kName;
  static_assert(NonFullRunSet<Set, Run>);
  // Bins live in arenas made by placement new in metadata memory and are
  // never destroyed: no destructor work, constant-initialisable.
  static_assert(std::is_trivially_destructible_v<Set>);
};

using RbFirstCase = Case<container_entries::rb_first>;
using RbRootCase = Case<container_entries::rb_root>;
using LifoCase = Case<container_entries::lifo>;
using ArrayHeapCase = Case<container_entries::array_heap>;
using PairingHeapCase = Case<container_entries::pairing_heap>;
using FullestFirstCase = Case<container_entries::fullest_first>;
using SortedByFreeCase = Case<container_entries::sorted_by_free>;
using AgeAddressCase = Case<container_entries::age_address>;
using PairingHeapLazyCase = Case<container_entries::pairing_heap_lazy>;
using WavlCase = Case<container_entries::wavl>;
using MozTreeCase = Case<container_entries::moz_tree>;
using JeSlabsCase = Case<container_entries::je_slabs>;

// Checks the set against the model: invariants, size, and the pick. A pick
// that moves runs (moz_tree's takes the tree's lowest run when there is no
// current run) is made only where a bin makes it, at an allocation: asked
// after every step, it would fill the no-current state at once and hide the
// rule that differs from rb_first.
template <class Set, class Model>
void verify(Set& set, Model& model, std::size_t step) {
  const char* why = "";
  ASSERT_TRUE(set.check(&why)) << "check() failed at step " << step << ": " << why;
  ASSERT_EQ(set.size(), model.size()) << "at step " << step;
  if constexpr (std::is_same_v<Model, CurrentThenLowestModel>) return;
  Run* expected = model.expected_pick(set);
  ASSERT_EQ(set.pick(), expected) << "at step " << step;
}

// ---- a bin, reduced to what touches the container --------------------------

template <class Case>
class BinSimulation {
 public:
  explicit BinSimulation(std::uint64_t seed) : rng_(seed) {
    // Most seeds use a few runs; every 10th 1,000 runs, and seeds 100, 300,
    // 500, ... 12,000 runs of 4 regions, which at 55% occupancy leaves about
    // 10,000 of them non-full (one such seed in the default 200 keeps the
    // run short; RUNSEL_STRESS adds more). Seeds 5, 15, 25, ... use up to
    // 16 runs of 130 to 299 regions, so that every occupancy bucket of
    // fullest_first is reached.
    std::size_t run_count = 1 + seed % 64;
    std::uint32_t capacity = 1 + rng_() % 8;
    if (seed % 200 == 100) {
      run_count = 12'000;
      capacity = 4;
    } else if (seed % 10 == 0) {
      run_count = 1'000;
    } else if (seed % 10 == 5) {
      run_count = 1 + seed % 16;
      capacity = 130 + rng_() % 170;
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
    ASSERT_EQ(set_.pick(), nullptr);
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
      verify(set_, model_, step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // The bin's allocation path: use the run pick() names, or start a new one.
  void allocate_region() {
    Run* run = set_.pick();
    Run* expected = model_.expected_pick(set_);
    ASSERT_EQ(run, expected) << "the bin's pick()";
    if (run == nullptr) {
      ASSERT_FALSE(spare_runs_.empty()) << "no non-full run and no spare run";
      run = spare_runs_.back();
      spare_runs_.pop_back();
      run->serial = next_serial_++;  // the arena numbers the runs it creates
      set_.insert(run);
      model_.insert(run);
    }
    ASSERT_LT(run->used, run->capacity) << "pick() returned a full run";
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

  std::mt19937_64 rng_;
  std::vector<Run> pool_;
  std::vector<Run*> spare_runs_;  // runs not holding any region
  std::vector<Run*> live_;        // one entry per allocated region: its run
  std::size_t max_live_ = 0;
  std::uint64_t next_serial_ = 0;
  typename Case::Set set_;
  typename Case::Model model_;
};

// ---- random operations, not shaped like a bin -------------------------------

// insert, erase (of the pick or of any member), pick and touched in random
// order, the set's size wandering between targets; seeds 50, 150, 250, ...
// reach 10,000 members. Each run has its own capacity (2 to 300 regions) and
// a serial number shared with some others; an insert or a touched call first
// sets a random occupancy (at least one region free).
template <class Case>
class RandomOperations {
 public:
  explicit RandomOperations(std::uint64_t seed) : rng_(seed) {
    const std::size_t capacity = seed % 100 == 50 ? 10'000 : 1 + rng_() % 200;
    pool_ = std::vector<Run>(capacity);
    for (Run& run : pool_) {
      run.capacity = 2 + static_cast<std::uint32_t>(rng_() % 299);
      run.serial = rng_() % (capacity / 2 + 1);
      add(outsiders_, &run);
    }
    // Random address order.
    for (std::size_t i = outsiders_.size(); i > 1; --i) swap_slots(outsiders_, i - 1, rng_() % i);
  }

  void run() {
    const std::size_t capacity = pool_.size();
    std::size_t step = 0;
    // Moving towards a target gains half a member per step on average (70%
    // towards, 20% away, 10% touched), so 4 x capacity steps all but always arrive.
    drive_to(capacity, 4 * capacity + 64, step);
    for (int phase = 0; phase < 3 && !::testing::Test::HasFatalFailure(); ++phase) {
      drive_to(rng_() % (capacity + 1), std::min<std::size_t>(capacity, 1'000) + 16, step);
    }
    drive_to(0, 4 * capacity + 64, step);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(members_.empty()) << "drain did not finish";
    ASSERT_EQ(set_.pick(), nullptr);
  }

 private:
  void drive_to(std::size_t target, std::size_t max_steps, std::size_t& step) {
    for (std::size_t i = 0; i < max_steps && members_.size() != target; ++i, ++step) {
      const unsigned dice = static_cast<unsigned>(rng_() % 100);
      const bool grow = members_.size() < target ? dice < 70 : dice < 20;
      if (dice >= 90 && !members_.empty()) {
        Run* run = members_[rng_() % members_.size()];
        run->used = static_cast<std::uint32_t>(rng_() % run->capacity);
        set_.touched(run);
        model_.touched(run);
      } else if (grow && !outsiders_.empty()) {
        Run* run = outsiders_[rng_() % outsiders_.size()];
        move(run, outsiders_, members_);
        run->used = static_cast<std::uint32_t>(rng_() % run->capacity);
        set_.insert(run);
        model_.insert(run);
      } else if (!grow && !members_.empty()) {
        // Half the time the run that fills is the pick; otherwise any member.
        Run* run = nullptr;
        if (rng_() % 2 == 0) {
          run = set_.pick();
          Run* expected = model_.expected_pick(set_);
          ASSERT_EQ(run, expected) << "at step " << step;
        } else {
          run = members_[rng_() % members_.size()];
        }
        move(run, members_, outsiders_);
        set_.erase(run);
        model_.erase(run);
      }
      if (::testing::Test::HasFatalFailure()) return;
      verify(set_, model_, step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  static void add(std::vector<Run*>& list, Run* run) {
    run->slot = list.size();
    list.push_back(run);
  }
  static void swap_slots(std::vector<Run*>& list, std::size_t a, std::size_t b) {
    std::swap(list[a], list[b]);
    list[a]->slot = a;
    list[b]->slot = b;
  }
  static void move(Run* run, std::vector<Run*>& from, std::vector<Run*>& to) {
    swap_slots(from, run->slot, from.size() - 1);
    from.pop_back();
    add(to, run);
  }

  std::mt19937_64 rng_;
  std::vector<Run> pool_;
  std::vector<Run*> members_;
  std::vector<Run*> outsiders_;
  typename Case::Set set_;
  typename Case::Model model_;
};

// ---- deliberate corruption --------------------------------------------------

// Breaks the structure of `set`, whose members are runs[0..] (at least 8, all
// inserted), through the hooks; check() must notice. `variant` picks one of
// two corruptions.
template <class Case>
void corrupt(typename Case::Set& set, std::vector<Run>& runs, int variant) {
  using Set = typename Case::Set;
  Run* pick = set.pick();
  if constexpr (std::is_same_v<Set, RbFirstCase::Set> || std::is_same_v<Set, RbRootCase::Set> ||
                std::is_same_v<Set, SortedByFreeCase::Set>) {
    TreeLinks<Run>& root = RunHook::hook(set.root()).tree;
    if (variant == 0) {
      root.parent_and_bit |= 1;  // a red root
    } else {
      std::swap(root.left, root.right);  // in-order no longer rises
    }
  } else if constexpr (std::is_same_v<Set, LifoCase::Set>) {
    ListLinks<Run>& head = RunHook::hook(pick).list;
    if (variant == 0) {
      RunHook::hook(head.next).list.prev = head.next;  // second run's prev wrong
    } else {
      Run* tail = pick;
      while (RunHook::hook(tail).list.next != nullptr) tail = RunHook::hook(tail).list.next;
      RunHook::hook(tail).list.next = pick;  // a cycle
    }
  } else if constexpr (std::is_same_v<Set, ArrayHeapCase::Set>) {
    if (variant == 0) {
      RunHook::hook(pick).heap_index = 3;  // the minimum claims another slot
    } else {
      // Two members exchange their recorded slots: each names the other's.
      std::swap(RunHook::hook(&runs[1]).heap_index, RunHook::hook(&runs[2]).heap_index);
    }
  } else if constexpr (std::is_same_v<Set, PairingHeapCase::Set> ||
                       std::is_same_v<Set, AgeAddressCase::Set> ||
                       std::is_same_v<Set, PairingHeapLazyCase::Set>) {
    // The root's leftmost child, or (lazy heap) the first aux tree.
    PairingLinks<Run>& root = RunHook::hook(pick).pairing;
    Run* below = root.child != nullptr ? root.child : root.next;
    ASSERT_NE(below, nullptr);
    if (variant == 0) {
      RunHook::hook(below).pairing.prev = nullptr;  // lost its link back
    } else {
      // It adopts the root: a cycle and an order violation.
      RunHook::hook(below).pairing.child = pick;
    }
  } else if constexpr (std::is_same_v<Set, WavlCase::Set>) {
    if (variant == 0) {
      Run* leaf = set.root();
      for (;;) {
        TreeLinks<Run>& links = RunHook::hook(leaf).tree;
        if (links.left == nullptr && links.right == nullptr) break;
        leaf = links.left != nullptr ? links.left : links.right;
      }
      RunHook::hook(leaf).tree.parent_and_bit ^= 1;  // a leaf of rank 1
    } else {
      TreeLinks<Run>& root = RunHook::hook(set.root()).tree;
      std::swap(root.left, root.right);  // in-order no longer rises
    }
  } else if constexpr (std::is_same_v<Set, MozTreeCase::Set>) {
    LlrbLinks<Run>& root = RunHook::hook(set.root()).llrb;
    if (variant == 0) {
      root.right_and_colour |= 1;  // a red root
    } else {
      // The current run is linked into the tree as well.
      Run* leaf = set.root();
      while (RunHook::hook(leaf).llrb.left != nullptr) leaf = RunHook::hook(leaf).llrb.left;
      RunHook::hook(leaf).llrb.left = set.current();
    }
  } else if constexpr (std::is_same_v<Set, JeSlabsCase::Set>) {
    PairingLinks<Run>& root = RunHook::hook(set.heap_first()).pairing;
    Run* below = root.child != nullptr ? root.child : root.next;
    ASSERT_NE(below, nullptr);
    if (variant == 0) {
      RunHook::hook(below).pairing.prev = nullptr;  // lost its link back
    } else {
      RunHook::hook(below).pairing.child = set.heap_first();  // a cycle
    }
  } else if constexpr (std::is_same_v<Set, FullestFirstCase::Set>) {
    if (variant == 0) {
      RunHook::hook(pick).buckets.bucket = 3;  // records a bucket it is not on
    } else {
      Run* tail = pick;
      while (RunHook::hook(tail).buckets.list.next != nullptr) tail = RunHook::hook(tail).buckets.list.next;
      RunHook::hook(tail).buckets.list.next = pick;  // a cycle
    }
  } else {
    static_assert(sizeof(Set) == 0, "no corruption written for this container");
  }
}

// ---- the typed tests -------------------------------------------------------

template <class Case>
class NonFullRunsTest : public ::testing::Test {};

// Every container of containers/list.h, each with the model of its policy.
template <class List>
struct CasesOf;
template <class... Entries>
struct CasesOf<ContainerList<Entries...>> {
  using type = ::testing::Types<Case<Entries>...>;
};
using Containers = CasesOf<AllContainers>::type;

struct ContainerName {
  template <class Case>
  static std::string GetName(int) {
    return Case::kName;
  }
};

TYPED_TEST_SUITE(NonFullRunsTest, Containers, ContainerName);

TYPED_TEST(NonFullRunsTest, StartsEmpty) {
  using Set = typename TypeParam::Set;
  static constinit Set global_set;  // the allocator's bins are constinit
  Set set;
  const char* why = "";
  EXPECT_TRUE(set.check(&why)) << why;
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.pick(), nullptr);
  EXPECT_TRUE(global_set.check(&why)) << why;
  EXPECT_EQ(global_set.pick(), nullptr);
}

TYPED_TEST(NonFullRunsTest, OneRunInAndOut) {
  typename TypeParam::Set set;
  Run run;
  run.capacity = 2;
  set.insert(&run);
  set.touched(&run);
  const char* why = "";
  EXPECT_TRUE(set.check(&why)) << why;
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.pick(), &run);
  set.erase(&run);
  EXPECT_TRUE(set.check(&why)) << why;
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.pick(), nullptr);
}

// The policy, spelled out on small hand-made sequences.
TYPED_TEST(NonFullRunsTest, PicksByItsPolicy) {
  typename TypeParam::Set set;
  std::vector<Run> runs(64);
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
  if constexpr (TypeParam::kPicks == Picks::lowest_address) {
    // pick() is the lowest address after every insert and erase.
    for (std::size_t i : {5, 2, 8, 1, 9, 3, 7}) {
      set.insert(at(i));
      ASSERT_TRUE(set.check(&why)) << why;
    }
    EXPECT_EQ(set.pick(), at(1));
    set.touched(at(1));
    set.touched(at(9));
    EXPECT_EQ(set.pick(), at(1));
    set.erase(at(1));
    EXPECT_EQ(set.pick(), at(2));
    set.erase(at(5));  // not the lowest: the pick stays
    EXPECT_EQ(set.pick(), at(2));
    set.insert(at(0));
    EXPECT_EQ(set.pick(), at(0));
    for (std::size_t expected : {0, 2, 3, 7, 8, 9}) {
      ASSERT_EQ(set.pick(), at(expected));
      set.erase(at(expected));
      ASSERT_TRUE(set.check(&why)) << why;
    }
    EXPECT_EQ(set.pick(), nullptr);
  } else if constexpr (TypeParam::kPicks == Picks::most_recent) {
    // pick() is the run inserted last that is still a member.
    set.insert(at(5));
    set.insert(at(2));
    set.insert(at(8));
    EXPECT_EQ(set.pick(), at(8));
    set.touched(at(2));  // frees and allocations do not move a run
    EXPECT_EQ(set.pick(), at(8));
    set.erase(at(8));
    EXPECT_EQ(set.pick(), at(2));
    set.erase(at(5));
    EXPECT_EQ(set.pick(), at(2));
    set.insert(at(1));
    EXPECT_EQ(set.pick(), at(1));
    set.insert(at(5));  // a run that left and came back goes to the front
    EXPECT_EQ(set.pick(), at(5));
    ASSERT_TRUE(set.check(&why)) << why;
  } else if constexpr (TypeParam::kPicks == Picks::fullest_bucket_recent) {
    // Buckets by regions allocated: 128 or more beat 4-7, which beat 1;
    // inside a bucket the run that entered it last wins, however full the
    // others are (the buckets' approximation).
    for (Run& run : runs) run.capacity = 256;
    at(0)->used = 200;
    at(1)->used = 130;
    at(2)->used = 5;
    at(3)->used = 1;
    set.insert(at(3));
    EXPECT_EQ(set.pick(), at(3));
    set.insert(at(2));
    EXPECT_EQ(set.pick(), at(2));
    set.insert(at(0));
    set.insert(at(1));
    EXPECT_EQ(set.pick(), at(1)) << "both hold 128 or more; the later insert wins";
    at(1)->used = 131;  // allocating from the pick keeps it
    set.touched(at(1));
    EXPECT_EQ(set.pick(), at(1));
    at(1)->used = 127;  // a free drops it below 128: bucket 1, and at(0) is the pick
    set.touched(at(1));
    EXPECT_EQ(set.pick(), at(0));
    at(3)->used = 3;  // 1 -> 3 allocated: to the front of bucket 6
    set.touched(at(3));
    at(2)->used = 128;  // 5 -> 128: to the front of bucket 0, before at(0)
    set.touched(at(2));
    EXPECT_EQ(set.pick(), at(2));
    ASSERT_TRUE(set.check(&why)) << why;
    for (std::size_t expected : {2, 0, 1, 3}) {
      ASSERT_EQ(set.pick(), at(expected));
      set.erase(at(expected));
      ASSERT_TRUE(set.check(&why)) << why;
    }
    EXPECT_EQ(set.pick(), nullptr);
  } else if constexpr (TypeParam::kPicks == Picks::fewest_free_lowest) {
    // Exactly the fewest free regions, ties to the lowest address; touched
    // re-sorts a run whose count changed.
    for (Run& run : runs) run.capacity = 64;
    at(0)->used = 10;  // free 54
    at(1)->used = 60;  // free 4
    at(2)->used = 60;  // free 4
    at(3)->used = 30;  // free 34
    for (std::size_t i : {0, 3, 2, 1}) set.insert(at(i));
    EXPECT_EQ(set.pick(), at(1));
    at(1)->used = 61;  // allocating from the pick keeps it
    set.touched(at(1));
    EXPECT_EQ(set.pick(), at(1));
    at(2)->used = 62;  // now free 2: the fewest
    set.touched(at(2));
    EXPECT_EQ(set.pick(), at(2));
    at(2)->used = 50;  // frees raise it to 14
    set.touched(at(2));
    EXPECT_EQ(set.pick(), at(1));
    at(3)->used = 51;  // 13 free: below at(2) now
    set.touched(at(3));
    ASSERT_TRUE(set.check(&why)) << why;
    for (std::size_t expected : {1, 3, 2, 0}) {
      ASSERT_EQ(set.pick(), at(expected));
      set.erase(at(expected));
      ASSERT_TRUE(set.check(&why)) << why;
    }
    EXPECT_EQ(set.pick(), nullptr);
  } else if constexpr (TypeParam::kPicks == Picks::oldest_lowest) {
    // The lowest serial number, ties to the lowest address; occupancy does
    // not matter.
    at(5)->serial = 3;
    at(2)->serial = 1;
    at(8)->serial = 1;
    at(1)->serial = 7;
    at(0)->serial = 9;
    for (std::size_t i : {5, 1, 8, 2}) set.insert(at(i));
    EXPECT_EQ(set.pick(), at(2));
    at(2)->used = 5;
    set.touched(at(2));
    EXPECT_EQ(set.pick(), at(2));
    set.erase(at(2));
    EXPECT_EQ(set.pick(), at(8));
    set.insert(at(0));  // the youngest, lowest address: last
    EXPECT_EQ(set.pick(), at(8));
    for (std::size_t expected : {8, 5, 1, 0}) {
      ASSERT_EQ(set.pick(), at(expected));
      set.erase(at(expected));
      ASSERT_TRUE(set.check(&why)) << why;
    }
    EXPECT_EQ(set.pick(), nullptr);
  } else if constexpr (TypeParam::kPicks == Picks::current_then_lowest) {
    // mozjemalloc's rules (containers/moz_tree.h). Runs of 4 regions; `used`
    // says whether an erased run filled (4) or emptied (0).
    for (Run& run : runs) run.capacity = 4;
    for (std::size_t i : {5, 2, 8}) set.insert(at(i));
    ASSERT_TRUE(set.check(&why)) << why;
    EXPECT_EQ(set.current(), at(2)) << "5 was current; 2, below it, took its place";
    EXPECT_EQ(set.pick(), at(2));
    // 2 empties: no current run. Run 9, full, regains a region: with no
    // current run it becomes current whatever its address, although 5 and 8
    // wait in the tree. rb_first would pick 5 here.
    set.erase(at(2));
    EXPECT_EQ(set.current(), nullptr);
    set.insert(at(9));
    EXPECT_EQ(set.pick(), at(9)) << "the no-current rule: not the lowest run";
    LowestAddressModel lowest;  // what rb_first would pick from the same members
    for (std::size_t i : {5, 8, 9}) lowest.insert(at(i));
    EXPECT_EQ(lowest.expected_pick(set), at(5));
    EXPECT_EQ(set.size(), 3u);
    ASSERT_TRUE(set.check(&why)) << why;
    // 9 fills: it stays current, full, and is no longer a member. Run 7
    // reopens: above the full current run, it goes into the tree, and the
    // next pick drops 9 and takes the lowest, 5.
    at(9)->used = 4;
    set.erase(at(9));
    EXPECT_EQ(set.current(), at(9));
    EXPECT_TRUE(set.current_full());
    set.insert(at(10));
    EXPECT_EQ(set.pick(), at(5));
    // 5 fills; run 1 reopens below it: current at once (5, full, dropped).
    at(5)->used = 4;
    set.erase(at(5));
    set.insert(at(1));
    EXPECT_EQ(set.pick(), at(1));
    // 3 reopens above the current run: the tree; 0 reopens below: current,
    // and 1 (not full) goes back into the tree (with 3, 8 and 10).
    set.insert(at(3));
    EXPECT_EQ(set.pick(), at(1));
    set.insert(at(0));
    EXPECT_EQ(set.pick(), at(0));
    EXPECT_EQ(set.size(), 5u);  // 0 current; 1, 3, 8, 10 in the tree
    ASSERT_TRUE(set.check(&why)) << why;
    // A full current run that regains a region stays current.
    at(0)->used = 4;
    set.erase(at(0));
    set.insert(at(0));
    EXPECT_EQ(set.pick(), at(0));
    for (std::size_t expected : {0, 1, 3, 8, 10}) {
      ASSERT_EQ(set.pick(), at(expected));
      at(expected)->used = 0;  // empties
      set.erase(at(expected));
      ASSERT_TRUE(set.check(&why)) << why;
    }
    EXPECT_EQ(set.pick(), nullptr);
  } else if constexpr (TypeParam::kPicks == Picks::sticky_root) {
    // The first pick() takes the tree's root; it stays the pick while the
    // tree grows and rotates around it, and only its erasure frees the choice.
    for (std::size_t i = 0; i < 3; ++i) set.insert(at(i));
    Run* pick = set.pick();
    EXPECT_EQ(pick, set.root());
    EXPECT_EQ(pick, at(1));  // three ascending inserts: the middle one is the root
    for (std::size_t i = 3; i < 64; ++i) set.insert(at(i));
    ASSERT_NE(set.root(), pick) << "the test needs the root to move";
    EXPECT_EQ(set.pick(), pick);
    set.touched(pick);
    set.erase(at(0));
    set.erase(set.root());
    EXPECT_EQ(set.pick(), pick);
    ASSERT_TRUE(set.check(&why)) << why;
    set.erase(pick);
    Run* next = set.pick();
    EXPECT_EQ(next, set.root());
    EXPECT_NE(next, pick);
    ASSERT_TRUE(set.check(&why)) << why;
  } else {
    static_assert(sizeof(TypeParam) == 0, "no policy test written for this container's picks");
  }
}

TYPED_TEST(NonFullRunsTest, MatchesModelUnderBinTraffic) {
  for (std::uint64_t seed : test_seeds(200)) {
    SCOPED_TRACE(replay_hint(seed));
    BinSimulation<TypeParam>(seed).run();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TYPED_TEST(NonFullRunsTest, MatchesModelUnderRandomOperations) {
  for (std::uint64_t seed : test_seeds(100)) {
    SCOPED_TRACE(replay_hint(seed));
    RandomOperations<TypeParam>(seed).run();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TYPED_TEST(NonFullRunsTest, CheckDetectsCorruption) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE("corruption " + std::to_string(variant));
    typename TypeParam::Set set;
    std::vector<Run> runs(16);
    std::vector<Run*> order;
    for (Run& run : runs) order.push_back(&run);
    std::mt19937_64 rng(7);
    std::shuffle(order.begin(), order.end(), rng);
    for (Run* run : order) set.insert(run);
    set.erase(order[0]);  // a pairing heap now has more than one level
    set.insert(order[0]);
    const char* why = nullptr;
    ASSERT_TRUE(set.check(&why)) << why;
    corrupt<TypeParam>(set, runs, variant);
    why = nullptr;
    EXPECT_FALSE(set.check(&why));
    ASSERT_NE(why, nullptr);
    EXPECT_STRNE(why, "");
    // The set is broken; it is simply dropped (no destructor to run).
  }
}

// Erasing a run that is not a member aborts in the container's erase(),
// before any link is written: its links (or its heap index) do not agree with
// the set's. That check is on in every build.
TYPED_TEST(NonFullRunsTest, EraseOfANonMemberAborts) {
  typename TypeParam::Set set;
  std::vector<Run> runs(4);
  for (std::size_t i = 0; i < 3; ++i) set.insert(&runs[i]);
  EXPECT_DEATH(set.erase(&runs[3]), "runsel: run 0x[0-9a-f]+: container links damaged");
}

// Only array_heap takes memory, and only through its traits' side memory:
// with none every other container still works, and array_heap stops at once.
TYPED_TEST(NonFullRunsTest, MemoryOnlyThroughTraits) {
  using Starved = typename TypeParam::template With<NoMemory>;
  std::vector<Run> runs(100);
  if constexpr (std::is_same_v<TypeParam, ArrayHeapCase>) {
    EXPECT_DEATH(
        {
          Starved set;
          set.insert(&runs[0]);
        },
        "array_heap: out of metadata");
    // With memory: the array doubles and each smaller array is returned.
    const std::size_t calls_before = CountingMemory::calls;
    const std::size_t live_before = CountingMemory::live_bytes;
    {
      typename TypeParam::Set set;
      for (Run& run : runs) set.insert(&run);
      EXPECT_EQ(CountingMemory::calls - calls_before, 4u);  // 16, 32, 64, 128 slots
      EXPECT_EQ(CountingMemory::live_bytes - live_before, 128 * sizeof(Run*));
      for (Run& run : runs) set.erase(&run);
    }
  } else {
    Starved set;
    for (Run& run : runs) set.insert(&run);
    const char* why = "";
    EXPECT_TRUE(set.check(&why)) << why;
    EXPECT_EQ(set.size(), runs.size());
    for (Run& run : runs) set.erase(&run);
    EXPECT_EQ(set.size(), 0u);
  }
}

}  // namespace
}  // namespace runsel
