// Randomized differential test of RbTree against std::set, with check() (the
// red-black colour rules) after every step; the driver is shared with the
// WavlTree test (support/tree_differential.h). Replay one seed:
// RUNSEL_TEST_SEED=<n>; scale: RUNSEL_STRESS=<k>.
#include "structures/rb_tree.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "support/tree_differential.h"

namespace runsel {
namespace {

using runsel_test::run_tree_differential;
using TestNode = runsel_test::TreeTestNode;
using ByKey = runsel_test::ByKeyOrder<TestNode>;
using ByAddress = runsel_test::ByAddressOrder<TestNode>;
using runsel_test::ByKeyModel;
using ByAddressModel = std::less<const TestNode*>;

static_assert(TreeRep<ByKey, TestNode>);
static_assert(TreeRep<ByAddress, TestNode>);

// The tree lives in constinit globals in the allocator.
constinit RbTree<TestNode, ByKey> g_constinit_tree;

TEST(RbTree, EmptyTree) {
  runsel_test::expect_empty_tree(RbTree<TestNode, ByKey>());
  runsel_test::expect_empty_tree(g_constinit_tree);
}

TEST(RbTree, DifferentialByKey) {
  run_tree_differential<RbTree<TestNode, ByKey>, TestNode, ByKeyModel>(200);
}

TEST(RbTree, DifferentialByAddress) {
  run_tree_differential<RbTree<TestNode, ByAddress>, TestNode, ByAddressModel>(200);
}

// ---- check() must catch corruption -----------------------------------------

class RbTreeCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    runsel_test::insert_permutation(tree_, nodes_);
    const char* why = "";
    ASSERT_TRUE(tree_.check(&why)) << why;
  }

  void expect_check_fails(const char* what) { runsel_test::expect_check_fails(tree_, what); }

  TestNode* find_node(bool want_red, bool want_leaf) {
    for (TestNode* node = tree_.first(); node != nullptr; node = tree_.next(node)) {
      const bool red = node->links.parent_and_bit & 1;
      const bool leaf = node->links.left == nullptr && node->links.right == nullptr;
      if (red == want_red && leaf == want_leaf && node != tree_.root()) return node;
    }
    return nullptr;
  }

  std::vector<TestNode> nodes_;
  RbTree<TestNode, ByKey> tree_;
};

TEST_F(RbTreeCorruption, RedRoot) {
  tree_.root()->links.parent_and_bit |= 1;
  expect_check_fails("red root");
}

TEST_F(RbTreeCorruption, FlippedColour) {
  TestNode* red_leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(red_leaf, nullptr);
  red_leaf->links.parent_and_bit ^= 1;  // now black: black heights differ
  expect_check_fails("red leaf turned black");
}

TEST_F(RbTreeCorruption, RedChildOfRed) {
  TestNode* red_leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(red_leaf, nullptr);
  TestNode* parent =
      reinterpret_cast<TestNode*>(red_leaf->links.parent_and_bit & ~std::uintptr_t{1});
  parent->links.parent_and_bit |= 1;
  expect_check_fails("red parent of a red leaf");
}

TEST_F(RbTreeCorruption, BrokenParentPointer) {
  TestNode* leaf = find_node(/*want_red=*/false, /*want_leaf=*/true);
  if (leaf == nullptr) leaf = find_node(/*want_red=*/true, /*want_leaf=*/true);
  ASSERT_NE(leaf, nullptr);
  leaf->links.parent_and_bit =
      reinterpret_cast<std::uintptr_t>(tree_.root()) | (leaf->links.parent_and_bit & 1);
  expect_check_fails("leaf pointing at the root as parent");
}

TEST_F(RbTreeCorruption, OrderViolation) {
  runsel_test::swap_two_keys(tree_);
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
