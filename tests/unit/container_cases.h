// The cases of the container tests (container_test.cpp, container_model_test.cpp,
// container_policy_test.cpp): a fake run header, the reference model of each
// policy, one Case per container of containers/list.h, and the typed-test
// list over them. meson runs each container's cases in its own suite
// (--gtest_filter=*/<container>.*).
#pragma once

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

#include "containers/container.h"
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

inline std::uintptr_t address(const Run* run) { return reinterpret_cast<std::uintptr_t>(run); }

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
      if (!current_full_) {
        EXPECT_TRUE(tree_.insert(current_).second);
      }
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

// Every container of containers/list.h, each with the model of its policy,
// as a list of types for TYPED_TEST_SUITE.
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

}  // namespace
}  // namespace runsel
