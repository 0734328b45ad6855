// Intrusive red-black tree over nodes that embed TreeLinks<Node>; the order and
// the place of the links come from a representation type Rep (see TreeRep).
// What does not depend on the balancing (insert() and erase() but their
// repairs, walks, lookups, rotations, check() but its rule) is BinaryTree's,
// shared with WavlTree.
//
// Complexity: insert and erase are O(log n), iterative, and never allocate;
// first() is O(1) (the minimum is cached and repaired on insert/erase, which
// costs one successor step when the minimum itself is erased); next() and
// previous() are amortised O(1); first_not_below() is O(log n); check() is O(n).
#pragma once

#include "structures/binary_tree.h"

namespace runsel {

// Rep must satisfy TreeRep (BinaryTree requires it).
template <class Node, class Rep>
class RbTree : public BinaryTree<RbTree<Node, Rep>, Node, Rep> {
  using Base = BinaryTree<RbTree<Node, Rep>, Node, Rep>;
  friend Base;

  using Base::checked_child, Base::checked_parent, Base::child, Base::kLeft;
  using Base::kRight, Base::left, Base::parent_of, Base::present_child, Base::right, Base::root_;
  using Base::path_parent, Base::rotate;

  // A new leaf is red.
  static constexpr bool kNewLeafBit = true;

  // If the node unlinked physically was black, the path through the hole
  // (which takes its place) lacks a black.
  static bool erase_debt(Node* unlinked) { return !is_red(unlinked); }

  // check()'s rule: the root is black, no red node has a red child, and below
  // each node every path to a missing child meets as many black nodes.
  static constexpr int kMissingFigure = 0;

  // Null leaves count as black.
  static bool is_red(Node* node) { return node != nullptr && Base::bit(node); }
  static void set_red(Node* node, bool red) { Base::set_bit(node, red); }

  // The rule at `node`, whose subtrees have these black heights (the black
  // nodes on a path down to a missing child); sets node's own.
  static bool check_rule(Node* node, int left_blacks, int right_blacks, int* blacks,
                         const char** why) {
    if (parent_of(node) == nullptr && is_red(node)) return check_failed(why, "root is red");
    if (left_blacks != right_blacks) return check_failed(why, "black heights differ");
    if (is_red(node) && (is_red(left(node)) || is_red(right(node)))) {
      return check_failed(why, "red node has a red child");
    }
    *blacks = left_blacks + (is_red(node) ? 0 : 1);
    return true;
  }

  // `node` is red; its parent may be red too. Push the violation upward.
  // The walk up stays on the path insert() verified (path_parent); every
  // other link followed is checked first (checked_child).
  void repair_after_insert(Node* node) {
    for (;;) {
      Node* parent = path_parent(node);
      if (parent == nullptr) {
        set_red(node, false);
        return;
      }
      if (!is_red(parent)) return;
      Node* grandparent = path_parent(parent);  // exists: a red node is not the root
      if constexpr (Base::kVerifies) {
        if (grandparent == nullptr) [[unlikely]]
          container_links_damaged(parent);  // a red root: its bit was written
      }
      const int side = parent == left(grandparent) ? kLeft : kRight;
      Node* uncle = checked_child(grandparent, 1 - side);
      if (is_red(uncle)) {
        set_red(parent, false);
        set_red(uncle, false);
        set_red(grandparent, true);
        node = grandparent;
        continue;
      }
      if (node == child(parent, 1 - side)) {  // inner grandchild: straighten
        rotate(parent, side);
        parent = node;
      }
      rotate(grandparent, 1 - side);
      set_red(parent, false);
      set_red(grandparent, true);
      return;
    }
  }

  // If `lacks_black`, paths through `node` (possibly null, child of
  // `parent`) lack one black.
  // The cases that need no rotation inline (a red node removed, the root, a
  // red child that takes the black), the loop out of line.
  void repair_after_erase(Node* node, Node* parent, bool lacks_black) {
    if (!lacks_black) return;
    if (node == root_ || is_red(node)) {
      if (node != nullptr) set_red(node, false);
      return;
    }
    restore_black_height(node, parent);
  }

  [[gnu::noinline]] void restore_black_height(Node* node, Node* parent) {
    while (node != root_ && !is_red(node)) {
      // The sibling exists: its side has black height of at least one.
      const int side = node == left(parent) ? kLeft : kRight;
      Node* sibling = present_child(parent, 1 - side);
      if (is_red(sibling)) {
        set_red(sibling, false);
        set_red(parent, true);
        rotate(parent, side);
        sibling = present_child(parent, 1 - side);
      }
      Node* inner = checked_child(sibling, side);
      Node* outer = checked_child(sibling, 1 - side);
      if (!is_red(inner) && !is_red(outer)) {
        set_red(sibling, true);
        node = parent;
        parent = checked_parent(node);
        continue;
      }
      if (!is_red(outer)) {  // only the inner nephew is red
        set_red(inner, false);
        set_red(sibling, true);
        rotate(sibling, 1 - side);
        sibling = present_child(parent, 1 - side);
      }
      set_red(sibling, is_red(parent));
      set_red(parent, false);
      set_red(child(sibling, 1 - side), false);
      rotate(parent, side);
      node = root_;
    }
    if (node != nullptr) set_red(node, false);
  }
};

}  // namespace runsel
