// Intrusive weak-AVL (WAVL) tree over nodes that embed TreeLinks<Node>. The
// order and the place of the links come from a representation type Rep (see
// TreeRep), as for RbTree. So does what does not depend on the balancing
// (BinaryTree: insert() and erase() but their repairs, walks, lookups,
// rotations, check() but its rule).
//
// Rank rule (Haeupler, Sen and Tarjan, "Rank-balanced trees"): every node has
// a rank, a missing child has rank -1, every rank difference between a
// parent and a child is 1 or 2, and every leaf has rank 0. Only the parity
// of a rank is stored (one bit beside the parent pointer): a difference is
// 1 when the parities differ and 2 when they are equal. Built by insertions
// alone the tree is an AVL tree (height <= 1.44 log2 n); with deletions the
// height stays below 2 log2 n. A deletion rotates at most twice (a
// red-black deletion up to three times), as does an insertion (as in a
// red-black tree), and most rebalancing steps only flip parity bits.
// Complexity: insert and erase O(log n), iterative, never allocate, at most
// two rotations each; first() O(1) (cached minimum, one successor step when
// it is erased); next() amortised O(1); check() O(n).
#pragma once

#include "structures/binary_tree.h"

namespace runsel {

// Rep must satisfy TreeRep (BinaryTree requires it).
template <class Node, class Rep>
class WavlTree : public BinaryTree<WavlTree<Node, Rep>, Node, Rep> {
  using Base = BinaryTree<WavlTree<Node, Rep>, Node, Rep>;
  friend Base;

  using Base::checked_child, Base::checked_parent, Base::child, Base::kLeft;
  using Base::kRight, Base::left, Base::links, Base::parent_of, Base::present_child, Base::right;
  using Base::path_parent, Base::root_, Base::rotate;

  // A new leaf has rank 0: even.
  static constexpr bool kNewLeafBit = false;

  // If the node unlinked physically was a 2-child, its child (one rank
  // further down) arrives in its place as a 3-child.
  static bool erase_debt(Node* unlinked) {
    return parent_of(unlinked) != nullptr && difference_is_two(unlinked, parent_of(unlinked));
  }

  // check()'s rule is the rank rule, checked by deriving each node's rank
  // from each of its two children (child rank + 1 or 2 by parity): both must
  // give the same rank, and a leaf's must be 0. A missing child has rank -1.
  static constexpr int kMissingFigure = -1;

  // A missing child has rank -1: odd.
  static bool parity(Node* node) { return node == nullptr || Base::bit(node); }
  // A promotion or a demotion changes the rank by one: it flips the parity.
  static void flip_rank(Node* node) { links(node).parent_word() ^= Base::kBit; }
  // For a child whose difference is known to be 1 or 2.
  static bool difference_is_two(Node* kid, Node* parent) { return parity(kid) == parity(parent); }
  static int step_to(Node* kid, Node* parent) { return difference_is_two(kid, parent) ? 2 : 1; }

  // The rule at `node`, whose children have these ranks (-1: missing): the
  // rank it gets from each child must agree, and a leaf's must be 0.
  static bool check_rule(Node* node, int left_rank, int right_rank, int* rank, const char** why) {
    const int from_left = left_rank + step_to(left(node), node);
    const int from_right = right_rank + step_to(right(node), node);
    if (from_left != from_right)
      return check_failed(why, "rank rule: a rank difference is not 1 or 2");
    if (left(node) == nullptr && right(node) == nullptr && from_left != 0) {
      return check_failed(why, "rank rule: a leaf's rank is not 0");
    }
    *rank = from_left;
    return true;
  }

  // `node` has just gained a rank (a new leaf counts as promoted from -1),
  // so its difference to its parent dropped from 1 or 2 to 0 or 1: equal
  // parities now mean a 0-child, the only possible violation.
  // The walk up stays on the path insert() verified (path_parent); every
  // other link followed is checked first (checked_child).
  void repair_after_insert(Node* node) {
    for (;;) {
      Node* parent = path_parent(node);  // on the path insert() verified
      if (parent == nullptr || parity(node) != parity(parent)) return;
      const int side = node == left(parent) ? kLeft : kRight;
      if (!difference_is_two(checked_child(parent, 1 - side), parent)) {
        flip_rank(parent);  // a 0,1 parent: promote it and look one level up
        node = parent;
        continue;
      }
      // A 0,2 parent. `node` was promoted, so it is a 1,2 node; its inner
      // child decides between one rotation and two.
      Node* inner = checked_child(node, 1 - side);
      if (inner == nullptr || difference_is_two(inner, node)) {
        rotate(parent, 1 - side);  // node rises with its rank; parent demoted
        flip_rank(parent);
      } else {
        rotate(node, side);  // inner rises twice: promoted, both others demoted
        rotate(parent, 1 - side);
        flip_rank(inner);
        flip_rank(node);
        flip_rank(parent);
      }
      return;
    }
  }

  // `hole` (possibly null) has just replaced the unlinked node below
  // `parent`, arriving one rank lower than that node: as a 3-child if the
  // node was a 2-child, or as a 2-child that may leave `parent` a leaf of
  // rank 1. Parity cannot tell a 3-child from a 1-child, so that state is
  // carried in `is_three_child` instead.
  void repair_after_erase(Node* hole, Node* parent, bool is_three_child) {
    if (parent == nullptr) return;
    if (!is_three_child) {
      if (hole != nullptr || left(parent) != nullptr || right(parent) != nullptr) return;
      // A 2,2 leaf: demote it, which may make it a 3-child in turn.
      is_three_child = demote_and_report_three(parent);
      if (!is_three_child) return;
      hole = parent;
      parent = checked_parent(hole);
    }
    // Invariant here: `hole` is a 3-child of `parent`. Its sibling has rank
    // at least 0, so it exists, and it tells the sides apart when `hole` is
    // null.
    while (parent != nullptr) {
      const int side = hole != nullptr ? (hole == left(parent) ? kLeft : kRight)
                                       : (left(parent) == nullptr ? kLeft : kRight);
      Node* sibling = present_child(parent, 1 - side);
      if (difference_is_two(sibling, parent)) {
        // A 3,2 node: demote it.
      } else if (difference_is_two(checked_child(sibling, kLeft), sibling) &&
                 difference_is_two(checked_child(sibling, kRight), sibling)) {
        flip_rank(sibling);  // a 1-child that is 2,2: demote both
      } else {
        rotate_after_erase(parent, sibling, side);
        return;
      }
      if (!demote_and_report_three(parent)) return;
      hole = parent;
      parent = checked_parent(hole);
    }
  }

  // Demotes `node`; true if that made it a 3-child of its parent.
  bool demote_and_report_three(Node* node) {
    Node* parent = checked_parent(node);
    const bool was_two_child = parent != nullptr && difference_is_two(node, parent);
    flip_rank(node);
    return was_two_child;
  }

  // `parent` has a 3-child on `side` and a 1-child `sibling` that is not
  // 2,2: one or two rotations end the repair.
  void rotate_after_erase(Node* parent, Node* sibling, int side) {
    Node* outer = checked_child(sibling, 1 - side);
    if (!difference_is_two(outer, sibling)) {
      // sibling rises: promoted; parent goes down, demoted, and demoted
      // twice (parity kept) if it is left a leaf.
      rotate(parent, side);
      flip_rank(sibling);
      if (left(parent) != nullptr || right(parent) != nullptr) flip_rank(parent);
      return;
    }
    // The inner child rises twice: promoted twice, sibling demoted once,
    // parent demoted twice.
    rotate(sibling, 1 - side);
    rotate(parent, side);
    flip_rank(sibling);
  }
};

}  // namespace runsel
