// Randomized differential test of WavlTree against std::set, with check() (the
// rank rule) after every step, the rotations of every insert and erase counted
// (at most two each) and the height bound checked; the driver is shared with
// the RbTree test (support/tree_differential.h). Replay one seed:
// RUNSEL_TEST_SEED=<n>; scale: RUNSEL_STRESS=<k>.
#include "structures/wavl_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "support/tree_differential.h"

namespace runsel {
namespace {

using runsel_test::run_tree_differential;
using TestNode = runsel_test::TreeTestNode;

// Rotations since the counter was last reset (the tests are single-threaded).
std::size_t g_rotations = 0;

// By (key, id), counting rotations.
struct ByKey : runsel_test::ByKeyOrder<TestNode> {
  static void on_rotate() { ++g_rotations; }
};
using runsel_test::ByKeyModel;
// By node address; no rotation counter.
using ByAddress = runsel_test::ByAddressOrder<TestNode>;
using ByAddressModel = std::less<const TestNode*>;

static_assert(TreeRep<ByKey, TestNode>);
static_assert(TreeRep<ByAddress, TestNode>);

constinit WavlTree<TestNode, ByKey> g_constinit_tree;

// Height in nodes (0 for an empty tree), by an explicit-stack walk.
template <class Tree>
std::size_t height(const Tree& tree) {
  std::vector<std::pair<TestNode*, std::size_t>> stack;
  std::size_t highest = 0;
  if (tree.root() != nullptr) stack.push_back({tree.root(), 1});
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    highest = std::max(highest, depth);
    if (node->links.left != nullptr) stack.push_back({node->links.left, depth + 1});
    if (node->links.right != nullptr) stack.push_back({node->links.right, depth + 1});
  }
  return highest;
}

// The WAVL rules the shared driver checks through its hooks.
struct WavlHooks {
  // Insertions only first: an AVL tree (height <= 1.44 log2 n).
  static constexpr unsigned kGrowthBias = 100;
  template <class Tree>
  static void after_growth(const Tree& tree) {
    const double n = static_cast<double>(tree.size());
    ASSERT_LE(static_cast<double>(height(tree)), 1.4405 * std::log2(n + 2) - 0.3277 + 1e-9);
  }
  static void before_change() { g_rotations = 0; }
  template <class Tree>
  static void after_change(const Tree&, const char* what) {
    ASSERT_LE(g_rotations, 2u) << "an " << what << " rotated more than twice";
  }
  template <class Tree>
  static void after_step(const Tree& tree, std::size_t step) {
    if (step % 64 != 0) return;
    // With deletions the height stays within 2 log2 n (rank <= 2 log2 n).
    const double n = static_cast<double>(tree.size());
    ASSERT_LE(static_cast<double>(height(tree)), 2 * std::log2(n + 1) + 1e-9);
  }
};

TEST(WavlTree, EmptyTree) {
  runsel_test::expect_empty_tree(WavlTree<TestNode, ByKey>());
  runsel_test::expect_empty_tree(g_constinit_tree);
}

TEST(WavlTree, DifferentialByKey) {
  run_tree_differential<WavlTree<TestNode, ByKey>, TestNode, ByKeyModel, WavlHooks>(200);
}

TEST(WavlTree, DifferentialByAddress) {
  run_tree_differential<WavlTree<TestNode, ByAddress>, TestNode, ByAddressModel, WavlHooks>(100);
}

// Ascending inserts then erasing every minimum: the bin's own pattern (the
// lowest run fills and leaves). Every insert and erase stays within two
// rotations, and the tree stays balanced throughout.
TEST(WavlTree, AscendingThenDrainFromTheBottom) {
  std::vector<TestNode> nodes(4096);
  WavlTree<TestNode, ByKey> tree;
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    nodes[i].key = i;
    nodes[i].id = 0;
    g_rotations = 0;
    tree.insert(&nodes[i]);
    ASSERT_LE(g_rotations, 2u);
  }
  const char* why = "";
  ASSERT_TRUE(tree.check(&why)) << why;
  EXPECT_LE(height(tree), 13u);  // a perfectly balanced 4,096-node tree has 13 levels
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    ASSERT_EQ(tree.first(), &nodes[i]);
    g_rotations = 0;
    tree.erase(&nodes[i]);
    ASSERT_LE(g_rotations, 2u);
    if (i % 97 == 0) {
      ASSERT_TRUE(tree.check(&why)) << why;
    }
  }
  EXPECT_TRUE(tree.empty());
}

// ---- check() must catch corruption -----------------------------------------

class WavlTreeCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    runsel_test::insert_permutation(tree_, nodes_);
    for (std::uint32_t i = 0; i < nodes_.size(); i += 3) tree_.erase(&nodes_[i]);
    const char* why = "";
    ASSERT_TRUE(tree_.check(&why)) << why;
  }

  void expect_check_fails(const char* what) { runsel_test::expect_check_fails(tree_, what); }

  TestNode* a_leaf() {
    for (TestNode* node = tree_.first(); node != nullptr; node = tree_.next(node)) {
      if (node->links.left == nullptr && node->links.right == nullptr) return node;
    }
    return nullptr;
  }

  std::vector<TestNode> nodes_;
  WavlTree<TestNode, ByKey> tree_;
};

TEST_F(WavlTreeCorruption, LeafOfRankOne) {
  TestNode* leaf = a_leaf();
  ASSERT_NE(leaf, nullptr);
  leaf->links.parent_and_bit ^= 1;
  expect_check_fails("a leaf's rank parity flipped");
}

TEST_F(WavlTreeCorruption, RanksDisagree) {
  // Flipping an inner node's parity leaves its two children implying ranks
  // that differ by one (or a rank difference of 0 or 3 somewhere).
  TestNode* inner = tree_.root()->links.left;
  ASSERT_NE(inner, nullptr);
  ASSERT_TRUE(inner->links.left != nullptr || inner->links.right != nullptr);
  inner->links.parent_and_bit ^= 1;
  expect_check_fails("an inner node's rank parity flipped");
}

TEST_F(WavlTreeCorruption, RotationWithoutRankChanges) {
  // A rotation that keeps the order, the count and every parent pointer but
  // updates no rank puts a node below its former child: a negative rank
  // difference, which the ranks derived from the two sides expose.
  TestNode* root = tree_.root();
  TestNode* top = root->links.left;
  ASSERT_NE(top, nullptr);
  TestNode* riser = top->links.left;
  ASSERT_NE(riser, nullptr);
  auto parent_word = [](TestNode* parent, TestNode* node) {
    return reinterpret_cast<std::uintptr_t>(parent) | (node->links.parent_and_bit & 1);
  };
  top->links.left = riser->links.right;
  if (top->links.left != nullptr)
    top->links.left->links.parent_and_bit = parent_word(top, top->links.left);
  riser->links.right = top;
  top->links.parent_and_bit = parent_word(riser, top);
  root->links.left = riser;
  riser->links.parent_and_bit = parent_word(root, riser);
  expect_check_fails("a right rotation without rank changes");
}

TEST_F(WavlTreeCorruption, BrokenParentPointer) {
  TestNode* leaf = a_leaf();
  ASSERT_NE(leaf, nullptr);
  leaf->links.parent_and_bit =
      reinterpret_cast<std::uintptr_t>(tree_.root()) | (leaf->links.parent_and_bit & 1);
  expect_check_fails("leaf pointing at the root as parent");
}

TEST_F(WavlTreeCorruption, OrderViolation) {
  runsel_test::swap_two_keys(tree_);
  expect_check_fails("two keys swapped");
}

TEST_F(WavlTreeCorruption, Cycle) {
  TestNode* leaf = a_leaf();
  ASSERT_NE(leaf, nullptr);
  leaf->links.left = tree_.root();  // the walk must stop, not loop forever
  expect_check_fails("leaf pointing back at the root");
}

}  // namespace
}  // namespace runsel
