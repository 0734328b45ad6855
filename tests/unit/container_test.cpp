// Every non-full run container on its own: empty, one run, the walker finding
// deliberate corruption, a non-member's erase aborting, and memory taken only
// through the traits' side memory. The reference models are in
// container_model_test.cpp, the policies spelled out in container_policy_test.cpp.
#include <gtest/gtest.h>

#include "container_cases.h"

namespace runsel {
namespace {

// ---- deliberate corruption --------------------------------------------------

// The leftmost leaf of the binary tree under root.
Run* leftmost_leaf(Run* root) {
  Run* leaf = root;
  for (;;) {
    TreeLinks<Run>& links = RunHook::hook(leaf).tree;
    if (links.left == nullptr && links.right == nullptr) break;
    leaf = links.left != nullptr ? links.left : links.right;
  }
  return leaf;
}

// Breaks the pairing links of the run below `root` (root's leftmost child, or else
// its next: in the lazy heap, the first aux tree): variant 0 loses its link back,
// variant 1 makes it adopt root, a cycle.
void corrupt_below_pairing_root(Run* root, int variant) {
  PairingLinks<Run>& links = RunHook::hook(root).pairing;
  Run* below = links.child != nullptr ? links.child : links.next;
  ASSERT_NE(below, nullptr);
  if (variant == 0) {
    RunHook::hook(below).pairing.prev = nullptr;  // lost its link back
  } else {
    RunHook::hook(below).pairing.child = root;  // a cycle
  }
}

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
    // The lowest run is held outside the heap (first_of.h); the heap's root is
    // the next. Adopting the root also breaks the order.
    corrupt_below_pairing_root(set.structure_first(), variant);
  } else if constexpr (std::is_same_v<Set, WavlCase::Set>) {
    if (variant == 0) {
      RunHook::hook(leftmost_leaf(set.root())).tree.parent_and_bit ^= 1;  // a leaf of rank 1
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
    corrupt_below_pairing_root(set.heap_first(), variant);
  } else if constexpr (std::is_same_v<Set, FullestFirstCase::Set>) {
    if (variant == 0) {
      RunHook::hook(pick).buckets.bucket = 3;  // records a bucket it is not on
    } else {
      Run* tail = pick;
      while (RunHook::hook(tail).buckets.list.next != nullptr)
        tail = RunHook::hook(tail).buckets.list.next;
      RunHook::hook(tail).buckets.list.next = pick;  // a cycle
    }
  } else {
    static_assert(sizeof(Set) == 0, "no corruption written for this container");
  }
}

template <class Case>
class NonFullRunsTest : public ::testing::Test {};
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

// The held lowest run (first_of.h) must stay below every member of the
// structure; check() finds a held run whose key was changed above the
// structure's first. Only age_address's key (the serial number) can change
// under a member; the address-ordered containers' cannot.
TYPED_TEST(NonFullRunsTest, CheckFindsAHeldRunAboveTheStructure) {
  if constexpr (!std::is_same_v<TypeParam, AgeAddressCase>) {
    GTEST_SKIP() << "only age_address holds a run whose key can be changed in place";
  } else {
    typename TypeParam::Set set;
    std::vector<Run> runs(3);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      runs[i].serial = i + 1;
      set.insert(&runs[i]);
    }
    ASSERT_EQ(set.pick(), &runs[0]);
    ASSERT_EQ(set.structure_first(), &runs[1]);
    const char* why = nullptr;
    ASSERT_TRUE(set.check(&why)) << why;
    runs[0].serial = 9;  // the held run's key, now above the structure's first
    why = nullptr;
    EXPECT_FALSE(set.check(&why));
    ASSERT_NE(why, nullptr);
    EXPECT_STREQ(why, "the held run is not below the structure's first member");
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