// Non-full run container "sorted_by_free" (proposed in Mozilla bug 1857133,
// "sort by free cells", and never measured): the red-black tree of runs
// ordered by (free regions, address); the next allocation uses the first.
//
// Policy: exactly the run with the fewest free regions, among equals the
// lowest address. It is the exact form of fullest_first's buckets: filling
// the fullest run first lets the emptiest drain, at the price of keeping the
// order exact as occupancies change, so the report can show what the
// buckets' approximation costs or saves. The pick is sticky: allocating from
// it only lowers its free count, so it stays first and does not move.
// Complexity: insert O(log n); erase O(log n); pick O(1) (cached minimum);
// touched O(1) when the run is still in order with its in-order neighbours
// (always after an allocation from the pick), else O(log n) (erase and
// insert again); check O(n). Memory: the three words of the 24-byte
// ContainerHook (left, right, parent+colour), nothing more per run; three
// words per bin (root, cached first, size). The key reads the run's free
// count through its traits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "containers/address_order.h"
#include "structures/rb_tree.h"
#include "structures/tree_links.h"

namespace runsel {

template <OccupancyAccess Traits>
class SortedByFreeRuns {
 public:
  using Node = typename Traits::Node;

  void insert(Node* run) { tree_.insert(run); }
  void erase(Node* run) { tree_.erase(run); }
  Node* pick() const { return tree_.first(); }

  // The tree's links do not depend on the key, so a run whose free count
  // changed can still be unlinked; it moves only if it is now out of order
  // with a neighbour (the rest of the sequence is untouched, so that is the
  // only place the order can break).
  void touched(Node* run) {
    Node* before = run == tree_.first() ? nullptr : tree_.previous(run);
    if (before == nullptr || ByFree::less(before, run)) {
      Node* after = tree_.next(run);
      if (after == nullptr || ByFree::less(run, after)) return;
    }
    tree_.erase(run);
    tree_.insert(run);
  }

  std::size_t size() const { return tree_.size(); }
  // For tests: the tree's root.
  Node* root() const { return tree_.root(); }

  // The tree verifies that its in-order sequence rises strictly by (free
  // count, address) with the cached minimum first, so pick() is the run with
  // the fewest free regions; that also proves touched() followed every change.
  bool check(const char** why) const { return tree_.check(why); }

 private:
  static bool fewer_free(const Node* a, const Node* b) {
    return key_then_address(Traits::free_regions(a), Traits::free_regions(b), a, b);
  }
  using ByFree = RunOrder<Traits, &ContainerHook<Node>::tree, &SortedByFreeRuns::fewer_free>;

  RbTree<Node, ByFree> tree_;
};

}  // namespace runsel
