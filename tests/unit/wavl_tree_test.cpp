// Randomized differential test of WavlTree against std::set, with check() (the
// rank rule) after every step, the rotations of every insert and erase counted
// (at most two each) and the height bound checked. Replay one seed:
// RUNSEL_TEST_SEED=<n>; scale: RUNSEL_STRESS=<k>.
#include "structures/wavl_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/seeds.h"

namespace runsel {
namespace {

using runsel_test::replay_hint;
using runsel_test::test_seeds;

// Most seeds keep the tree small (where rebalancing cases are densest); every
// 10th grows it to 1,000 nodes and every 100th to 10,000.
std::size_t max_size_for(std::uint64_t seed) {
  if (seed % 100 == 0) return 10'000;
  if (seed % 10 == 0) return 1'000;
  return 1 + seed % 97;
}

struct TestNode {
  WavlLinks<TestNode> links;
  std::uint64_t key;
  std::uint32_t id;    // tie-break for equal keys
  std::uint32_t slot;  // index in members or outsiders
};

// Rotations since the counter was last reset (the tests are single-threaded).
std::size_t g_rotations = 0;

// By (key, id), keys from a small range so many are equal.
struct ByKey {
  static WavlLinks<TestNode>& links(TestNode* node) { return node->links; }
  static bool less(const TestNode* a, const TestNode* b) {
    if (a->key != b->key) return a->key < b->key;
    return a->id < b->id;
  }
  static void on_rotate() { ++g_rotations; }
};
struct ByKeyModel {
  bool operator()(const TestNode* a, const TestNode* b) const {
    return std::pair(a->key, a->id) < std::pair(b->key, b->id);
  }
};

// By node address, as the run containers order runs; no rotation counter.
struct ByAddress {
  static WavlLinks<TestNode>& links(TestNode* node) { return node->links; }
  static bool less(const TestNode* a, const TestNode* b) {
    return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
  }
};
using ByAddressModel = std::less<const TestNode*>;

static_assert(WavlRep<ByKey, TestNode>);
static_assert(WavlRep<ByAddress, TestNode>);

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

template <class Rep, class ModelLess>
class Differential {
 public:
  explicit Differential(std::uint64_t seed)
      : rng_(seed), max_size_(max_size_for(seed)), pool_(max_size_) {
    const std::uint64_t key_range = max_size_ / 4 + 2;
    for (std::uint32_t i = 0; i < pool_.size(); ++i) {
      TestNode& node = pool_[i];
      node.key = rng_() % key_range;
      node.id = i + 1;
      node.slot = i;
      outsiders_.push_back(&node);
    }
  }

  void run() {
    // Insertions only first: an AVL tree (height <= 1.44 log2 n).
    run_phase(max_size_, 100, max_size_, /*stop_at_target=*/true);
    if (::testing::Test::HasFatalFailure()) return;
    const double n = static_cast<double>(tree_.size());
    ASSERT_LE(static_cast<double>(height(tree_)), 1.4405 * std::log2(n + 2) - 0.3277 + 1e-9);
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
      ASSERT_EQ(tree_.first(), model_.empty() ? nullptr : *model_.begin());
      if (step % 64 == 0) {
        // With deletions the height stays within 2 log2 n (rank <= 2 log2 n).
        const double n = static_cast<double>(tree_.size());
        ASSERT_LE(static_cast<double>(height(tree_)), 2 * std::log2(n + 1) + 1e-9);
      }
    }
  }

  void one_step(std::size_t target, unsigned bias_percent) {
    const unsigned op = rng_() % 100;
    if (op < 85) {
      const bool toward = rng_() % 100 < bias_percent;
      const bool insert_wanted = (tree_.size() < target) == toward;
      if (!outsiders_.empty() && (insert_wanted || members_.empty())) {
        insert(outsiders_[rng_() % outsiders_.size()]);
      } else if (!members_.empty()) {
        // One erase in five takes the minimum, as a bin's pick filling.
        erase(rng_() % 5 == 0 ? tree_.first() : members_[rng_() % members_.size()]);
      }
    } else if (op < 98) {
      check_next();
    } else {
      check_full_walk();
    }
  }

  void insert(TestNode* node) {
    move(node, outsiders_, members_);
    g_rotations = 0;
    tree_.insert(node);
    ASSERT_LE(g_rotations, 2u) << "an insert rotated more than twice";
    ASSERT_TRUE(model_.insert(node).second);
  }

  void erase(TestNode* node) {
    move(node, members_, outsiders_);
    g_rotations = 0;
    tree_.erase(node);
    ASSERT_LE(g_rotations, 2u) << "an erase rotated more than twice";
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
  WavlTree<TestNode, Rep> tree_;
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

TEST(WavlTree, EmptyTree) {
  WavlTree<TestNode, ByKey> tree;
  const char* why = "";
  EXPECT_TRUE(tree.check(&why)) << why;
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.root(), nullptr);
  EXPECT_EQ(tree.first(), nullptr);
  EXPECT_TRUE(g_constinit_tree.empty());
  EXPECT_TRUE(g_constinit_tree.check(&why)) << why;
}

TEST(WavlTree, DifferentialByKey) { run_all_seeds<ByKey, ByKeyModel>(200); }

TEST(WavlTree, DifferentialByAddress) { run_all_seeds<ByAddress, ByAddressModel>(100); }

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
    nodes_.resize(100);
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i].key = (i * 37) % 100;  // a permutation, inserted out of order
      nodes_[i].id = i;
      tree_.insert(&nodes_[i]);
    }
    for (std::uint32_t i = 0; i < nodes_.size(); i += 3) tree_.erase(&nodes_[i]);
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
  leaf->links.parent_and_parity ^= 1;
  expect_check_fails("a leaf's rank parity flipped");
}

TEST_F(WavlTreeCorruption, RanksDisagree) {
  // Flipping an inner node's parity leaves its two children implying ranks
  // that differ by one (or a rank difference of 0 or 3 somewhere).
  TestNode* inner = tree_.root()->links.left;
  ASSERT_NE(inner, nullptr);
  ASSERT_TRUE(inner->links.left != nullptr || inner->links.right != nullptr);
  inner->links.parent_and_parity ^= 1;
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
    return reinterpret_cast<std::uintptr_t>(parent) | (node->links.parent_and_parity & 1);
  };
  top->links.left = riser->links.right;
  if (top->links.left != nullptr)
    top->links.left->links.parent_and_parity = parent_word(top, top->links.left);
  riser->links.right = top;
  top->links.parent_and_parity = parent_word(riser, top);
  root->links.left = riser;
  riser->links.parent_and_parity = parent_word(root, riser);
  expect_check_fails("a right rotation without rank changes");
}

TEST_F(WavlTreeCorruption, BrokenParentPointer) {
  TestNode* leaf = a_leaf();
  ASSERT_NE(leaf, nullptr);
  leaf->links.parent_and_parity =
      reinterpret_cast<std::uintptr_t>(tree_.root()) | (leaf->links.parent_and_parity & 1);
  expect_check_fails("leaf pointing at the root as parent");
}

TEST_F(WavlTreeCorruption, OrderViolation) {
  TestNode* low = tree_.first();
  TestNode* high = tree_.next(tree_.next(low));
  std::swap(low->key, high->key);
  std::swap(low->id, high->id);
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
