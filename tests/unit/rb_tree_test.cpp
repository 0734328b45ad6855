// Randomized differential test of RbTree against std::set, with check() after
// every step. Replay one seed: RUNSEL_TEST_SEED=<n>; scale: RUNSEL_STRESS=<k>.
#include "structures/rb_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/seeds.h"

namespace runsel {
namespace {

// ---- seeds -----------------------------------------------------------------

using runsel_test::replay_hint;
using runsel_test::test_seeds;

// Most seeds keep the tree small (where rebalancing cases are densest); every
// 10th grows it to 1,000 nodes and every 100th to 10,000.
std::size_t max_size_for(std::uint64_t seed) {
  if (seed % 100 == 0) return 10'000;
  if (seed % 10 == 0) return 1'000;
  return 1 + seed % 97;
}

// ---- nodes and orders ------------------------------------------------------

struct TestNode {
  RbLinks<TestNode> links;
  std::uint64_t key;
  std::uint32_t id;    // tie-break for equal keys, like (size, address)
  std::uint32_t slot;  // index in members or outsiders
  bool in_tree;
};

// Order 1: by (key, id), keys drawn from a small range so many are equal.
struct ByKey {
  static RbLinks<TestNode>& links(TestNode* node) { return node->links; }
  static bool less(const TestNode* a, const TestNode* b) {
    if (a->key != b->key) return a->key < b->key;
    return a->id < b->id;
  }
};
struct ByKeyModel {
  bool operator()(const TestNode* a, const TestNode* b) const {
    return std::pair(a->key, a->id) < std::pair(b->key, b->id);
  }
};

// Order 2: by node address, as the run containers order runs.
struct ByAddress {
  static RbLinks<TestNode>& links(TestNode* node) { return node->links; }
  static bool less(const TestNode* a, const TestNode* b) {
    return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
  }
};
using ByAddressModel = std::less<const TestNode*>;

static_assert(RbRep<ByKey, TestNode>);
static_assert(RbRep<ByAddress, TestNode>);

// The tree lives in constinit globals in the allocator.
constinit RbTree<TestNode, ByKey> g_constinit_tree;

// ---- the differential driver -----------------------------------------------

template <class Rep, class ModelLess>
class Differential {
 public:
  explicit Differential(std::uint64_t seed)
      : rng_(seed), max_size_(max_size_for(seed)), pool_(max_size_) {
    const std::uint64_t key_range = max_size_ / 4 + 2;
    for (std::uint32_t i = 0; i < pool_.size(); ++i) {
      TestNode& node = pool_[i];
      node.key = rng_() % key_range;
      node.id = i + 1;  // probes use id 0, so they sort before equal keys
      node.in_tree = false;
      node.slot = i;
      outsiders_.push_back(&node);
    }
  }

  void run() {
    // Grow to the full size, wander between random sizes, then drain.
    run_phase(max_size_, 95, 3 * max_size_ + 100, /*stop_at_target=*/true);
    const std::size_t wander_steps = std::min<std::size_t>(max_size_, 2'000) / 2 + 100;
    for (int phase = 0; phase < 4 && !::testing::Test::HasFatalFailure(); ++phase) {
      run_phase(rng_() % (max_size_ + 1), 75, wander_steps, /*stop_at_target=*/false);
    }
    if (::testing::Test::HasFatalFailure()) return;
    run_phase(0, 95, 3 * max_size_ + 100, /*stop_at_target=*/true);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(tree_.empty()) << "drain did not finish";
    ASSERT_EQ(tree_.first(), nullptr);
    ASSERT_EQ(tree_.root(), nullptr);
  }

 private:
  // Random operations; inserts and erases move the size towards `target`
  // with probability `bias_percent`.
  void run_phase(std::size_t target, unsigned bias_percent, std::size_t steps,
                 bool stop_at_target) {
    for (std::size_t step = 0; step < steps; ++step) {
      if (stop_at_target && tree_.size() == target) return;
      SCOPED_TRACE("step " + std::to_string(step_++) + ", size " + std::to_string(tree_.size()));
      one_step(target, bias_percent);
      if (::testing::Test::HasFatalFailure()) return;
      const char* why = "";
      ASSERT_TRUE(tree_.check(&why)) << "check() failed: " << why;
      ASSERT_EQ(tree_.size(), model_.size());
      ASSERT_EQ(tree_.empty(), model_.empty());
      ASSERT_EQ(tree_.root() == nullptr, model_.empty());
      ASSERT_EQ(tree_.first(), model_.empty() ? nullptr : *model_.begin());
    }
  }

  void one_step(std::size_t target, unsigned bias_percent) {
    const unsigned op = rng_() % 100;
    if (op < 75) {
      const bool toward = rng_() % 100 < bias_percent;
      const bool insert_wanted = (tree_.size() < target) == toward;
      if (!outsiders_.empty() && (insert_wanted || members_.empty())) {
        insert(outsiders_[rng_() % outsiders_.size()]);
      } else if (!members_.empty()) {
        // One erase in five takes the minimum, exercising the cached first.
        erase(rng_() % 5 == 0 ? tree_.first() : members_[rng_() % members_.size()]);
      }
    } else if (op < 85) {
      check_next();
      check_previous();
    } else if (op < 98) {
      check_first_not_below();
    } else {
      check_full_walk();
    }
  }

  void insert(TestNode* node) {
    move(node, outsiders_, members_);
    node->in_tree = true;
    tree_.insert(node);
    ASSERT_TRUE(model_.insert(node).second);
  }

  void erase(TestNode* node) {
    ASSERT_TRUE(node->in_tree);
    move(node, members_, outsiders_);
    node->in_tree = false;
    tree_.erase(node);
    ASSERT_EQ(model_.erase(node), 1u);
  }

  static void move(TestNode* node, std::vector<TestNode*>& from, std::vector<TestNode*>& to) {
    TestNode* last = from.back();
    from[node->slot] = last;
    last->slot = node->slot;
    from.pop_back();
    node->slot = static_cast<std::uint32_t>(to.size());
    to.push_back(node);
  }

  void check_next() {
    if (members_.empty()) return;
    TestNode* node = members_[rng_() % members_.size()];
    auto after = model_.upper_bound(node);
    ASSERT_EQ(tree_.next(node), after == model_.end() ? nullptr : *after);
  }

  void check_previous() {
    if (members_.empty()) return;
    TestNode* node = members_[rng_() % members_.size()];
    auto at = model_.find(node);
    ASSERT_EQ(tree_.previous(node), at == model_.begin() ? nullptr : *std::prev(at));
  }

  // The probe is a node the model order can compare: a fresh (key, id 0) for
  // the key order, any pool node (member or not) for the address order.
  void check_first_not_below() {
    TestNode fresh{};
    fresh.key = rng_() % (max_size_ / 4 + 3);
    fresh.id = 0;
    TestNode* probe = &fresh;
    if constexpr (std::is_same_v<Rep, ByAddress>) probe = &pool_[rng_() % pool_.size()];
    const ModelLess model_less;
    TestNode* found =
        tree_.first_not_below([&](const TestNode* node) { return model_less(node, probe); });
    auto expected = model_.lower_bound(probe);
    ASSERT_EQ(found, expected == model_.end() ? nullptr : *expected);
  }

  void check_full_walk() {
    auto expected = model_.begin();
    for (TestNode* node = tree_.first(); node != nullptr; node = tree_.next(node), ++expected) {
      ASSERT_NE(expected, model_.end());
      ASSERT_EQ(node, *expected);
    }
    ASSERT_EQ(expected, model_.end());
  }

  std::mt19937_64 rng_;
  std::size_t max_size_;
  std::size_t step_ = 0;
  std::vector<TestNode> pool_;
  std::vector<TestNode*> members_;
  std::vector<TestNode*> outsiders_;
  RbTree<TestNode, Rep> tree_;
  std::set<TestNode*, ModelLess> model_;
};

template <class Rep, class ModelLess>
void run_all_seeds(std::uint64_t count) {
  for (std::uint64_t seed : test_seeds(count)) {
    SCOPED_TRACE(replay_hint(seed));
    Differential<Rep, ModelLess>(seed).run();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(RbTree, EmptyTree) {
  RbTree<TestNode, ByKey> tree;
  const char* why = "";
  EXPECT_TRUE(tree.check(&why)) << why;
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.root(), nullptr);
  EXPECT_EQ(tree.first(), nullptr);
  EXPECT_EQ(tree.first_not_below([](const TestNode*) { return false; }), nullptr);
  EXPECT_TRUE(g_constinit_tree.empty());
  EXPECT_TRUE(g_constinit_tree.check(&why)) << why;
}

TEST(RbTree, DifferentialByKey) { run_all_seeds<ByKey, ByKeyModel>(200); }

TEST(RbTree, DifferentialByAddress) { run_all_seeds<ByAddress, ByAddressModel>(200); }

// ---- check() must catch corruption -----------------------------------------

class RbTreeCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.resize(100);
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i].key = (i * 37) % 100;  // a permutation, inserted out of order
      nodes_[i].id = i;
      tree_.insert(&nodes_[i]);
    }
    const char* why = "";
    ASSERT_TRUE(tree_.check(&why)) << why;
  }

  void expect_check_fails(const char* what) {
    const char* why = nullptr;
    EXPECT_FALSE(tree_.check(&why)) << what << " went unnoticed";
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why), "");
    std::printf("  %s -> check(): %s\n", what, why);
  }

  TestNode* find_node(bool want_red, bool want_leaf) {
    for (TestNode* node = tree_.first(); node != nullptr; node = tree_.next(node)) {
      const bool red = node->links.parent_and_color & 1;
      const bool leaf = node->links.left == nullptr && node->links.right == nullptr;
      if (red == want_red && leaf == want_leaf && node != tree_.root()) return node;
    }
    return nullptr;
  }

  std::vector<TestNode> nodes_;
  RbTree<TestNode, ByKey> tree_;
};

TEST_F(RbTreeCorruption, RedRoot) {
  tree_.root()->links.parent_and_color |= 1;
  expect_check_fails("red root");
}

TEST_F(RbTreeCorruption, FlippedColour) {
  TestNode* red_leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(red_leaf, nullptr);
  red_leaf->links.parent_and_color ^= 1;  // now black: black heights differ
  expect_check_fails("red leaf turned black");
}

TEST_F(RbTreeCorruption, RedChildOfRed) {
  TestNode* red_leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(red_leaf, nullptr);
  TestNode* parent =
      reinterpret_cast<TestNode*>(red_leaf->links.parent_and_color & ~std::uintptr_t{1});
  parent->links.parent_and_color |= 1;
  expect_check_fails("red parent of a red leaf");
}

TEST_F(RbTreeCorruption, BrokenParentPointer) {
  TestNode* leaf = find_node(/*want_red=*/false, /*want_leaf=*/true);
  if (leaf == nullptr) leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(leaf, nullptr);
  leaf->links.parent_and_color =
      reinterpret_cast<std::uintptr_t>(tree_.root()) | (leaf->links.parent_and_color & 1);
  expect_check_fails("leaf pointing at the root as parent");
}

TEST_F(RbTreeCorruption, OrderViolation) {
  TestNode* low = tree_.first();
  TestNode* high = tree_.next(tree_.next(low));
  std::swap(low->key, high->key);
  std::swap(low->id, high->id);
  expect_check_fails("two keys swapped");
}

TEST_F(RbTreeCorruption, LostSubtree) {
  TestNode* root = tree_.root();
  root->links.left = nullptr;  // its nodes still count in size()
  expect_check_fails("left subtree of the root cut off");
}

TEST_F(RbTreeCorruption, Cycle) {
  TestNode* leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(leaf, nullptr);
  leaf->links.left = tree_.root();  // the walk must stop, not loop forever
  expect_check_fails("leaf pointing back at the root");
}

}  // namespace
}  // namespace runsel
