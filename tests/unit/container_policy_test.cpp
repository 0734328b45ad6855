// The policy of every non-full run container, spelled out on small hand-made
// sequences: one function per kind of pick (containers/list.h's Picks), and a
// typed test that runs the one of each container's policy.
#include <gtest/gtest.h>

#include "container_cases.h"

namespace runsel {
namespace {

// pick() is the lowest address after every insert and erase.
template <class Set>
void picks_lowest_address(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

// pick() is the run inserted last that is still a member.
template <class Set>
void picks_most_recent(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

// Buckets by regions allocated: 128 or more beat 4-7, which beat 1;
// inside a bucket the run that entered it last wins, however full the
// others are (the buckets' approximation).
template <class Set>
void picks_fullest_bucket_recent(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

// Exactly the fewest free regions, ties to the lowest address; touched
// re-sorts a run whose count changed.
template <class Set>
void picks_fewest_free_lowest(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

// The lowest serial number, ties to the lowest address; occupancy does
// not matter.
template <class Set>
void picks_oldest_lowest(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

// The first pick() takes the tree's root; it stays the pick while the
// tree grows and rotates around it, and only its erasure frees the choice.
template <class Set>
void picks_sticky_root(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

// mozjemalloc's rules (containers/moz_tree.h). Runs of 4 regions; `used`
// says whether an erased run filled (4) or emptied (0).
template <class Set>
void picks_current_then_lowest(Set& set, std::vector<Run>& runs) {
  const char* why = "";
  auto at = [&](std::size_t i) { return &runs[i]; };
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
}

template <class Case>
class ContainerPolicyTest : public ::testing::Test {};
TYPED_TEST_SUITE(ContainerPolicyTest, Containers, ContainerName);

TYPED_TEST(ContainerPolicyTest, PicksByItsPolicy) {
  typename TypeParam::Set set;
  std::vector<Run> runs(64);
  if constexpr (TypeParam::kPicks == Picks::lowest_address) {
    picks_lowest_address(set, runs);
  } else if constexpr (TypeParam::kPicks == Picks::most_recent) {
    picks_most_recent(set, runs);
  } else if constexpr (TypeParam::kPicks == Picks::fullest_bucket_recent) {
    picks_fullest_bucket_recent(set, runs);
  } else if constexpr (TypeParam::kPicks == Picks::fewest_free_lowest) {
    picks_fewest_free_lowest(set, runs);
  } else if constexpr (TypeParam::kPicks == Picks::oldest_lowest) {
    picks_oldest_lowest(set, runs);
  } else if constexpr (TypeParam::kPicks == Picks::current_then_lowest) {
    picks_current_then_lowest(set, runs);
  } else if constexpr (TypeParam::kPicks == Picks::sticky_root) {
    picks_sticky_root(set, runs);
  } else {
    static_assert(sizeof(TypeParam) == 0, "no policy test written for this container's picks");
  }
}

}  // namespace
}  // namespace runsel
