// What the RbTree and WavlTree tests share: a test node, the two orders, a
// randomized differential driver against std::set (check() after every step)
// and the checks of an empty tree and of check() catching a corruption.
// Each tree's test adds its own rules through a Hooks type (see
// TreeDifferential). Replay one seed: RUNSEL_TEST_SEED=<n>; scale:
// RUNSEL_STRESS=<k>.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "structures/tree_links.h"
#include "support/seeds.h"

namespace runsel_test {

// Most seeds keep the tree small (where rebalancing cases are densest); every
// 10th grows it to 1,000 nodes and every 100th to 10,000.
inline std::size_t tree_max_size_for(std::uint64_t seed) {
  if (seed % 100 == 0) return 10'000;
  if (seed % 10 == 0) return 1'000;
  return 1 + seed % 97;
}

struct TreeTestNode {
  runsel::TreeLinks<TreeTestNode> links;
  std::uint64_t key;
  std::uint32_t id;    // tie-break for equal keys, like (size, address)
  std::uint32_t slot;  // index in members or outsiders
  bool in_tree;
};

// Order 1: by (key, id), keys drawn from a small range so many are equal.
template <class Node>
struct ByKeyOrder {
  static auto& links(Node* node) { return node->links; }
  // Every link is taken for a node of the tree, so the trees' back-link
  // checks run on every insert and erase (and must never fire).
  static bool linked(const Node*, const Node*) { return true; }
  static bool less(const Node* a, const Node* b) {
    if (a->key != b->key) return a->key < b->key;
    return a->id < b->id;
  }
};
struct ByKeyModel {
  template <class Node>
  bool operator()(const Node* a, const Node* b) const {
    return std::pair(a->key, a->id) < std::pair(b->key, b->id);
  }
};

// Order 2: by node address, as the run containers order runs.
template <class Node>
struct ByAddressOrder {
  static auto& links(Node* node) { return node->links; }
  static bool linked(const Node*, const Node*) { return true; }
  static bool less(const Node* a, const Node* b) {
    return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
  }
};

// What a tree's test adds to the driver; the defaults add nothing.
//   kGrowthBias: percent of changes that grow the tree in the first phase
//     (100: insertions only);
//   after_growth(tree): checked once the tree has grown to its full size;
//   before_change() / after_change(tree, what): around every insert and
//     erase (what is "insert" or "erase");
//   after_step(tree, step): after every step's check().
struct NoTreeHooks {
  static constexpr unsigned kGrowthBias = 95;
  template <class Tree>
  static void after_growth(const Tree&) {}
  static void before_change() {}
  template <class Tree>
  static void after_change(const Tree&, const char*) {}
  template <class Tree>
  static void after_step(const Tree&, std::size_t) {}
};

// Random inserts, erases and lookups on Tree and on a std::set model.
template <class Tree, class Node, class ModelLess, class Hooks = NoTreeHooks>
class TreeDifferential {
 public:
  explicit TreeDifferential(std::uint64_t seed)
      : rng_(seed), max_size_(tree_max_size_for(seed)), pool_(max_size_) {
    const std::uint64_t key_range = max_size_ / 4 + 2;
    for (std::uint32_t i = 0; i < pool_.size(); ++i) {
      Node& node = pool_[i];
      node.key = rng_() % key_range;
      node.id = i + 1;  // probes use id 0, so they sort before equal keys
      node.in_tree = false;
      node.slot = i;
      outsiders_.push_back(&node);
    }
  }

  void run() {
    // Grow to the full size, wander between random sizes, then drain.
    run_phase(max_size_, Hooks::kGrowthBias, 3 * max_size_ + 100, /*stop_at_target=*/true);
    if (::testing::Test::HasFatalFailure()) return;
    Hooks::after_growth(tree_);
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
      Hooks::after_step(tree_, step);
      if (::testing::Test::HasFatalFailure()) return;
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
        // One erase in five takes the minimum, as a bin's pick filling.
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

  void insert(Node* node) {
    move(node, outsiders_, members_);
    node->in_tree = true;
    Hooks::before_change();
    tree_.insert(node);
    Hooks::after_change(tree_, "insert");
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(model_.insert(node).second);
  }

  void erase(Node* node) {
    ASSERT_TRUE(node->in_tree);
    move(node, members_, outsiders_);
    node->in_tree = false;
    Hooks::before_change();
    tree_.erase(node);
    Hooks::after_change(tree_, "erase");
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(model_.erase(node), 1u);
  }

  static void move(Node* node, std::vector<Node*>& from, std::vector<Node*>& to) {
    Node* last = from.back();
    from[node->slot] = last;
    last->slot = node->slot;
    from.pop_back();
    node->slot = static_cast<std::uint32_t>(to.size());
    to.push_back(node);
  }

  void check_next() {
    if (members_.empty()) return;
    Node* node = members_[rng_() % members_.size()];
    auto after = model_.upper_bound(node);
    ASSERT_EQ(tree_.next(node), after == model_.end() ? nullptr : *after);
  }

  void check_previous() {
    if (members_.empty()) return;
    Node* node = members_[rng_() % members_.size()];
    auto at = model_.find(node);
    ASSERT_EQ(tree_.previous(node), at == model_.begin() ? nullptr : *std::prev(at));
  }

  // The probe is a node the model order can compare: a fresh (key, id 0) for
  // the key order, any pool node (member or not) for the address order.
  void check_first_not_below() {
    Node fresh{};
    fresh.key = rng_() % (max_size_ / 4 + 3);
    fresh.id = 0;
    Node* probe = &fresh;
    if constexpr (std::is_same_v<ModelLess, std::less<const Node*>>) {
      probe = &pool_[rng_() % pool_.size()];
    }
    const ModelLess model_less;
    Node* found = tree_.first_not_below([&](const Node* node) { return model_less(node, probe); });
    auto expected = model_.lower_bound(probe);
    ASSERT_EQ(found, expected == model_.end() ? nullptr : *expected);
  }

  void check_full_walk() {
    auto expected = model_.begin();
    for (Node* node = tree_.first(); node != nullptr; node = tree_.next(node), ++expected) {
      ASSERT_NE(expected, model_.end());
      ASSERT_EQ(node, *expected);
    }
    ASSERT_EQ(expected, model_.end());
  }

  std::mt19937_64 rng_;
  std::size_t max_size_;
  std::size_t step_ = 0;
  std::vector<Node> pool_;
  std::vector<Node*> members_;
  std::vector<Node*> outsiders_;
  Tree tree_;
  std::set<Node*, ModelLess> model_;
};

// The differential test over `count` seeds (scaled by RUNSEL_STRESS).
template <class Tree, class Node, class ModelLess, class Hooks = NoTreeHooks>
void run_tree_differential(std::uint64_t count) {
  for (std::uint64_t seed : test_seeds(count)) {
    SCOPED_TRACE(replay_hint(seed));
    TreeDifferential<Tree, Node, ModelLess, Hooks>(seed).run();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// An empty tree, default-constructed or constinit, is valid and empty.
template <class Tree>
void expect_empty_tree(const Tree& tree) {
  const char* why = "";
  EXPECT_TRUE(tree.check(&why)) << why;
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.root(), nullptr);
  EXPECT_EQ(tree.first(), nullptr);
  EXPECT_EQ(tree.first_not_below([](const auto*) { return false; }), nullptr);
}

// check() must report the corruption `what` with a non-empty reason.
template <class Tree>
void expect_check_fails(const Tree& tree, const char* what) {
  const char* why = nullptr;
  EXPECT_FALSE(tree.check(&why)) << what << " went unnoticed";
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why), "");
  std::printf("  %s -> check(): %s\n", what, why);
}

// The fixture of the corruption tests: 100 nodes, keys a permutation
// inserted out of order.
template <class Tree, class Node>
void insert_permutation(Tree& tree, std::vector<Node>& nodes) {
  nodes.resize(100);
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    nodes[i].key = (i * 37) % 100;
    nodes[i].id = i;
    tree.insert(&nodes[i]);
  }
}

// A corruption whatever the balancing: two nodes' keys swapped in place.
template <class Tree>
void swap_two_keys(Tree& tree) {
  auto* low = tree.first();
  auto* high = tree.next(tree.next(low));
  std::swap(low->key, high->key);
  std::swap(low->id, high->id);
}

}  // namespace runsel_test
