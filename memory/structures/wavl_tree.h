// Intrusive weak-AVL (WAVL) tree over nodes that embed WavlLinks<Node>; the
// order and the place of the links come from a representation type Rep (see
// WavlRep), as for RbTree, and so does what does not depend on the balancing
// (BinaryTree: walks, lookups, linking and unlinking, rotations).
//
// Rank rule (Haeupler, Sen and Tarjan, "Rank-balanced trees"): every node has
// a rank, a missing child has rank -1, every rank difference between a
// parent and a child is 1 or 2, and every leaf has rank 0. Only the parity
// of a rank is stored (one bit beside the parent pointer): a difference is
// 1 when the parities differ and 2 when they are equal. Built by insertions
// alone the tree is an AVL tree (height <= 1.44 log2 n); with deletions the
// height stays below 2 log2 n. Unlike a red-black tree, a deletion rotates
// at most twice (and an insertion too), and most rebalancing steps only flip
// parity bits.
// Complexity: insert and erase O(log n), iterative, never allocate, at most
// two rotations each; first() O(1) (cached minimum, one successor step when
// it is erased); next() amortised O(1); check() O(n).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "structures/binary_tree.h"
#include "structures/wavl_links.h"

namespace runsel {

// Rep::links(node) gives the node's embedded links; Rep::less is a strict
// total order. A Rep may also define static on_rotate() (see BinaryTree).
template <class Rep, class Node>
concept WavlRep = TreeRep<Rep, Node, WavlLinks<Node>>;

template <class Node, class Rep>
requires WavlRep<Rep, Node>
class WavlTree : public BinaryTree<Node, Rep, WavlLinks<Node>> {
  using Base = BinaryTree<Node, Rep, WavlLinks<Node>>;

 public:
  // Depth bound for any valid tree in a 64-bit address space (2*log2(n)+1).
  static constexpr int kMaxDepth = 130;

  void insert(Node* node) {
    this->link_leaf(node, /*leaf_bit=*/false);  // a leaf: rank 0
    repair_after_insert(node);
  }

  void erase(Node* node) {
    // If the node physically unlinked was a 2-child, its child (one rank
    // further down) arrives in its place as a 3-child.
    Node* unlinked = Base::node_to_unlink(node);
    const bool unlinked_was_two_child =
        parent_of(unlinked) != nullptr && difference_is_two(unlinked, parent_of(unlinked));
    Node* hole_parent;
    Node* hole = this->unlink(node, unlinked, &hole_parent);
    repair_after_erase(hole, hole_parent, unlinked_was_two_child);
  }

  // Verifies every invariant; on the first violation sets *why and returns
  // false. Safe on corrupted trees: the walk stops after size() nodes.
  // The rank rule is checked by deriving each node's rank from each of its
  // two children (child rank + 1 or 2 by parity): both must give the same
  // rank, and a leaf's must be 0.
  bool check(const char** why) const {
    const char* ignored;
    if (why == nullptr) why = &ignored;
    if (root_ == nullptr) {
      if (size_ != 0) return fail(why, "root is null but size() is not zero");
      if (first_ != nullptr) return fail(why, "cached first is set in an empty tree");
      return true;
    }
    if (parent_of(root_) != nullptr) return fail(why, "root has a parent");

    // One walk: pre-order on the way down (links, count, depth), in-order
    // between a node's subtrees (the order), post-order on the way up
    // (ranks). Each stack entry is a node whose subtrees are not finished.
    struct Pending {
      Node* node;
      int stage;      // 0: left subtree next, 1: right subtree next
      int left_rank;  // rank of the left child (-1 when absent)
    };
    Pending stack[kMaxDepth];
    int top = 0;
    std::size_t count = 0;
    Node* previous = nullptr;
    Node* node = root_;
    int finished_rank = -1;  // rank of the subtree just completed
    for (;;) {
      if (node != nullptr) {
        if (++count > size_) return fail(why, "more nodes reachable than size()");
        for (int dir = kLeft; dir <= kRight; ++dir) {
          Node* kid = child(node, dir);
          if (kid != nullptr && parent_of(kid) != node) {
            return fail(why, "child's parent pointer is wrong");
          }
        }
        if (top == kMaxDepth) return fail(why, "tree deeper than kMaxDepth");
        stack[top++] = {node, 0, -1};
        node = left(node);
        continue;
      }
      // An empty subtree, or a finished one, was just left: hand its rank
      // to the node above.
      if (top == 0) break;
      Pending& above = stack[top - 1];
      Node* kid = above.stage == 0 ? left(above.node) : right(above.node);
      if (kid == nullptr) finished_rank = -1;
      if (above.stage == 0) {
        above.left_rank = finished_rank;
        if (previous == nullptr) {
          if (first_ != above.node) return fail(why, "cached first is not the minimum");
        } else if (!Rep::less(previous, above.node)) {
          return fail(why, "in-order nodes not strictly increasing");
        }
        previous = above.node;
        above.stage = 1;
        node = right(above.node);
        continue;
      }
      Node* done = above.node;
      const int from_left = above.left_rank + step_to(left(done), done);
      const int from_right = finished_rank + step_to(right(done), done);
      if (from_left != from_right) {
        return fail(why, "rank rule: a rank difference is not 1 or 2");
      }
      if (left(done) == nullptr && right(done) == nullptr && from_left != 0) {
        return fail(why, "rank rule: a leaf's rank is not 0");
      }
      finished_rank = from_left;
      --top;
    }
    if (count != size_) return fail(why, "fewer nodes reachable than size()");
    return true;
  }

 private:
  using Base::child;
  using Base::fail;
  using Base::first_;
  using Base::kLeft;
  using Base::kRight;
  using Base::left;
  using Base::links;
  using Base::parent_of;
  using Base::right;
  using Base::root_;
  using Base::rotate;
  using Base::size_;

  // A missing child has rank -1: odd.
  static bool parity(Node* node) { return node == nullptr || Base::bit(node); }
  // A promotion or a demotion changes the rank by one: it flips the parity.
  static void flip_rank(Node* node) { links(node).parent_word() ^= Base::kBit; }
  // For a child whose difference is known to be 1 or 2.
  static bool difference_is_two(Node* kid, Node* parent) { return parity(kid) == parity(parent); }
  static int step_to(Node* kid, Node* parent) { return difference_is_two(kid, parent) ? 2 : 1; }

  // `node` has just gained a rank (a new leaf counts as promoted from -1),
  // so its difference to its parent dropped from 1 or 2 to 0 or 1: equal
  // parities now mean a 0-child, the only possible violation.
  void repair_after_insert(Node* node) {
    for (;;) {
      Node* parent = parent_of(node);
      if (parent == nullptr || parity(node) != parity(parent)) return;
      const int side = node == left(parent) ? kLeft : kRight;
      if (!difference_is_two(child(parent, 1 - side), parent)) {
        flip_rank(parent);  // a 0,1 parent: promote it and look one level up
        node = parent;
        continue;
      }
      // A 0,2 parent. `node` was promoted, so it is a 1,2 node; its inner
      // child decides between one rotation and two.
      Node* inner = child(node, 1 - side);
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
      parent = parent_of(hole);
    }
    // Invariant here: `hole` is a 3-child of `parent`. Its sibling has rank
    // at least 0, so it exists, and it tells the sides apart when `hole` is
    // null.
    while (parent != nullptr) {
      const int side = hole != nullptr ? (hole == left(parent) ? kLeft : kRight)
                                       : (left(parent) == nullptr ? kLeft : kRight);
      Node* sibling = child(parent, 1 - side);
      if (difference_is_two(sibling, parent)) {
        // A 3,2 node: demote it.
      } else if (difference_is_two(child(sibling, kLeft), sibling) &&
                 difference_is_two(child(sibling, kRight), sibling)) {
        flip_rank(sibling);  // a 1-child that is 2,2: demote both
      } else {
        rotate_after_erase(parent, sibling, side);
        return;
      }
      if (!demote_and_report_three(parent)) return;
      hole = parent;
      parent = parent_of(hole);
    }
  }

  // Demotes `node`; true if that made it a 3-child of its parent.
  bool demote_and_report_three(Node* node) {
    const bool was_two_child =
        parent_of(node) != nullptr && difference_is_two(node, parent_of(node));
    flip_rank(node);
    return was_two_child;
  }

  // `parent` has a 3-child on `side` and a 1-child `sibling` that is not
  // 2,2: one or two rotations end the repair.
  void rotate_after_erase(Node* parent, Node* sibling, int side) {
    Node* outer = child(sibling, 1 - side);
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
