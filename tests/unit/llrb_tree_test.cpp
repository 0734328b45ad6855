// Randomized differential test of LlrbTree (moz_tree's tree) against
// std::set: inserts, erases of the minimum (a bin's refill) and of arbitrary
// members, with check() (the 2-3-4 colour rules, black heights, order, size)
// after every operation, the in-order sequence compared with the model, and
// every link the tree follows verified against membership. Replay one seed:
// RUNSEL_TEST_SEED=<n>; scale: RUNSEL_STRESS=<k>.
#include "structures/llrb_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/seeds.h"

namespace runsel {
namespace {

using runsel_test::Random;

struct Node {
  LlrbLinks<Node> links;
  std::uint64_t key;  // distinct: a permutation of the pool
  bool member;
  std::uint32_t slot;  // index in the members or outsiders vector
};

// Links the tree reads must name a member (or be null), as RunTraits::linked
// demands a run of the same bin: a stale link to an erased node fails.
std::size_t g_bad_links = 0;
std::size_t g_verified = 0;
struct VerifiedRep {
  static LlrbLinks<Node>& links(Node* node) { return node->links; }
  static bool linked(const Node*, const Node* neighbour) {
    ++g_verified;
    if (neighbour == nullptr || neighbour->member) return true;
    ++g_bad_links;
    return true;  // counted, not fatal: the test reports it
  }
};
struct ByAddress : VerifiedRep {
  static bool less(const Node* a, const Node* b) {
    return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
  }
};
struct ByKey : VerifiedRep {
  static bool less(const Node* a, const Node* b) { return a->key < b->key; }
};

static_assert(VerifiesLinks<ByAddress, Node>);

// In-order members by the tree's own links (no verification).
std::vector<Node*> in_order(Node* root) {
  std::vector<Node*> out, stack;
  for (Node* at = root; at != nullptr || !stack.empty();) {
    for (; at != nullptr; at = at->links.left) stack.push_back(at);
    at = stack.back();
    stack.pop_back();
    out.push_back(at);
    at = reinterpret_cast<Node*>(at->links.right_and_colour & ~std::uintptr_t{1});
  }
  return out;
}

// Most seeds keep the tree small, where the transforms' cases are densest;
// every 10th grows to 1,000 nodes, every 100th to 3,000.
std::size_t max_size_for(std::uint64_t seed) {
  if (seed % 100 == 0) return 3'000;
  if (seed % 10 == 0) return 1'000;
  return 1 + seed % 61;
}

template <class Rep, class ModelLess>
void run_seed(std::uint64_t seed) {
  Random random(seed);
  const std::size_t max_size = max_size_for(seed);
  std::vector<Node> pool(max_size);
  std::vector<std::uint64_t> keys(max_size);
  for (std::size_t i = 0; i < max_size; ++i) keys[i] = i;
  for (std::size_t i = max_size; i > 1; --i) std::swap(keys[i - 1], keys[random.below(i)]);
  for (std::size_t i = 0; i < max_size; ++i) pool[i] = {{nullptr, 0}, keys[i], false, 0};
  LlrbTree<Node, Rep> tree;
  std::set<Node*, ModelLess> model;
  std::vector<Node*> members, outsiders;
  for (Node& node : pool) {
    node.slot = static_cast<std::uint32_t>(outsiders.size());
    outsiders.push_back(&node);
  }
  auto move = [](Node* node, std::vector<Node*>& from, std::vector<Node*>& to) {
    from[node->slot] = from.back();
    from[node->slot]->slot = node->slot;
    from.pop_back();
    node->slot = static_cast<std::uint32_t>(to.size());
    to.push_back(node);
  };
  // Grow, wander, drain: the share of inserts per phase.
  const unsigned insert_percent[] = {90, 50, 70, 30, 55, 0};
  const std::size_t steps = 2 * max_size + 40;
  for (unsigned percent : insert_percent) {
    for (std::size_t step = 0; step < steps; ++step) {
      const bool grow = !outsiders.empty() && (members.empty() || random.below(100) < percent);
      if (!grow && members.empty()) break;
      const char* what = "insert";
      if (grow) {
        Node* node = outsiders[random.below(outsiders.size())];
        move(node, outsiders, members);
        node->member = true;
        tree.insert(node);
        model.insert(node);
      } else {
        Node* node = random.one_in(3) ? tree.first() : members[random.below(members.size())];
        what = "erase";
        ASSERT_NE(node, nullptr);
        tree.erase(node);
        node->member = false;
        ASSERT_EQ(model.erase(node), 1u);
        move(node, members, outsiders);
      }
      const char* why = "";
      ASSERT_TRUE(tree.check(&why))
          << "after " << what << " (step " << step << ", size " << tree.size() << "): " << why;
      ASSERT_EQ(g_bad_links, 0u) << "a link to a non-member was followed, after " << what;
      ASSERT_EQ(tree.size(), model.size());
      ASSERT_EQ(tree.first(), model.empty() ? nullptr : *model.begin());
      if (!members.empty()) {
        ASSERT_TRUE(tree.contains(members[random.below(members.size())]));
      }
      if (!outsiders.empty()) {
        ASSERT_FALSE(tree.contains(outsiders[random.below(outsiders.size())]));
      }
      if (model.size() < 64 || random.one_in(64)) {
        ASSERT_EQ(in_order(tree.root()), std::vector<Node*>(model.begin(), model.end()));
      }
    }
  }
  while (!members.empty()) {  // drain by the minimum, as a bin's refills do
    Node* first = tree.first();
    ASSERT_EQ(first, *model.begin());
    tree.erase(first);
    first->member = false;
    model.erase(model.begin());
    members.pop_back();
    const char* why = "";
    ASSERT_TRUE(tree.check(&why)) << why;
  }
  EXPECT_EQ(tree.root(), nullptr);
  EXPECT_EQ(tree.size(), 0u);
}

template <class Rep, class ModelLess>
void run_seeds(std::uint64_t count) {
  g_bad_links = 0;
  g_verified = 0;
  for (std::uint64_t seed : runsel_test::test_seeds(count)) {
    SCOPED_TRACE(runsel_test::replay_hint(seed));
    run_seed<Rep, ModelLess>(seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(g_verified, 0u) << "no link was verified";
}

struct KeyLess {
  bool operator()(const Node* a, const Node* b) const { return a->key < b->key; }
};

TEST(LlrbTree, DifferentialByAddress) { run_seeds<ByAddress, std::less<Node*>>(200); }
TEST(LlrbTree, DifferentialByKey) { run_seeds<ByKey, KeyLess>(200); }

TEST(LlrbTree, EmptyTree) {
  static constinit LlrbTree<Node, ByAddress> global;  // bins are constinit
  const char* why = "";
  EXPECT_TRUE(global.check(&why)) << why;
  EXPECT_EQ(global.first(), nullptr);
  EXPECT_EQ(global.size(), 0u);
}

// ---- check() must catch corruption ----------------------------------------

class LlrbTreeCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_.resize(100);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i] = {{nullptr, 0}, (i * 37) % 100, true, 0};
      tree_.insert(&nodes_[i]);
    }
    const char* why = "";
    ASSERT_TRUE(tree_.check(&why)) << why;
  }
  void expect_check_fails(const char* what) {
    const char* why = nullptr;
    EXPECT_FALSE(tree_.check(&why)) << what << " went unnoticed";
    ASSERT_NE(why, nullptr);
    std::printf("  %s -> check(): %s\n", what, why);
  }
  static bool red(const Node* node) { return node->links.right_and_colour & 1; }
  static Node* right(const Node* node) {
    return reinterpret_cast<Node*>(node->links.right_and_colour & ~std::uintptr_t{1});
  }
  std::vector<Node> nodes_;
  LlrbTree<Node, ByKey> tree_;
};

TEST_F(LlrbTreeCorruption, RedRoot) {
  tree_.root()->links.right_and_colour |= 1;
  expect_check_fails("red root");
}

TEST_F(LlrbTreeCorruption, RedRightChild) {
  Node* node = right(tree_.root());
  ASSERT_NE(node, nullptr);
  node->links.right_and_colour |= 1;
  expect_check_fails("red right child");
}

TEST_F(LlrbTreeCorruption, ThreeRedsInARow) {
  // A path of three left links, all made red below a black node: the
  // black heights still agree on that path only if the walker misses it.
  Node* at = tree_.root();
  for (int i = 0; i < 3 && at->links.left != nullptr; ++i) {
    at = at->links.left;
    at->links.right_and_colour |= 1;
  }
  expect_check_fails("three red left links");
}

TEST_F(LlrbTreeCorruption, OrderViolation) {
  Node* low = tree_.first();
  Node* high = tree_.root();
  std::swap(low->key, high->key);
  expect_check_fails("two keys swapped");
}

TEST_F(LlrbTreeCorruption, LostSubtree) {
  tree_.root()->links.left = nullptr;
  expect_check_fails("left subtree of the root cut off");
}

TEST_F(LlrbTreeCorruption, Cycle) {
  Node* leaf = tree_.first();
  leaf->links.left = tree_.root();
  expect_check_fails("leaf pointing back at the root");
}

}  // namespace
}  // namespace runsel
