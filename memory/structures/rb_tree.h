// Intrusive red-black tree over nodes that embed RbLinks<Node>; the order and
// the place of the links come from a representation type Rep (see RbRep).
// What does not depend on the balancing (walks, lookups, linking and
// unlinking, rotations) is BinaryTree's, shared with WavlTree.
//
// Complexity: insert and erase are O(log n), iterative, and never allocate;
// first() is O(1) (the minimum is cached and repaired on insert/erase, which
// costs one successor step when the minimum itself is erased); next() and
// previous() are amortised O(1); first_not_below() is O(log n); check() is O(n).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "structures/binary_tree.h"
#include "structures/rb_links.h"

namespace runsel {

// Rep::links(node) gives the node's embedded links; Rep::less is a strict total
// order (two distinct nodes never compare equal).
template <class Rep, class Node>
concept RbRep = TreeRep<Rep, Node, RbLinks<Node>>;

template <class Node, class Rep>
requires RbRep<Rep, Node>
class RbTree : public BinaryTree<Node, Rep, RbLinks<Node>> {
  using Base = BinaryTree<Node, Rep, RbLinks<Node>>;

 public:
  // Depth bound for any valid tree in a 64-bit address space (2*log2(n)+2).
  static constexpr int kMaxDepth = 128;

  void insert(Node* node) {
    this->link_leaf(node, /*leaf_bit=*/true);  // red
    repair_after_insert(node);
  }

  void erase(Node* node) {
    // If the node physically unlinked was black, the path through `hole`
    // (which takes its place) lacks a black.
    Node* unlinked = Base::node_to_unlink(node);
    const bool removed_black = !is_red(unlinked);
    Node* hole_parent;
    Node* hole = this->unlink(node, unlinked, &hole_parent);
    if (removed_black) repair_after_erase(hole, hole_parent);
  }

  // Verifies every invariant; on the first violation sets *why and returns
  // false. Safe on corrupted trees: the walk stops after size() nodes.
  bool check(const char** why) const {
    const char* ignored;
    if (why == nullptr) why = &ignored;
    if (root_ == nullptr) {
      if (size_ != 0) return fail(why, "root is null but size() is not zero");
      if (first_ != nullptr) return fail(why, "cached first is set in an empty tree");
      return true;
    }
    if (parent_of(root_) != nullptr) return fail(why, "root has a parent");
    if (is_red(root_)) return fail(why, "root is red");

    // One in-order walk; the explicit stack holds the ancestors not yet
    // visited, so it never holds more than the tree's depth.
    struct Pending {
      Node* node;
      int blacks;  // black nodes from the root down to and including `node`
    };
    Pending stack[kMaxDepth];
    int top = 0;
    std::size_t count = 0;
    int black_height = -1;
    Node* previous = nullptr;
    Node* node = root_;
    int blacks = 1;
    for (;;) {
      while (node != nullptr) {
        if (++count > size_) return fail(why, "more nodes reachable than size()");
        for (int dir = kLeft; dir <= kRight; ++dir) {
          Node* kid = child(node, dir);
          if (kid == nullptr) {
            if (black_height < 0) black_height = blacks;
            if (blacks != black_height) return fail(why, "black heights differ");
          } else if (parent_of(kid) != node) {
            return fail(why, "child's parent pointer is wrong");
          } else if (is_red(node) && is_red(kid)) {
            return fail(why, "red node has a red child");
          }
        }
        if (top == kMaxDepth) return fail(why, "tree deeper than kMaxDepth");
        stack[top++] = {node, blacks};
        node = left(node);
        if (node != nullptr && !is_red(node)) ++blacks;
      }
      if (top == 0) break;
      const Pending visited = stack[--top];
      if (previous == nullptr) {
        if (first_ != visited.node) return fail(why, "cached first is not the minimum");
      } else if (!Rep::less(previous, visited.node)) {
        return fail(why, "in-order nodes not strictly increasing");
      }
      previous = visited.node;
      node = right(visited.node);
      blacks = visited.blacks + (node != nullptr && !is_red(node) ? 1 : 0);
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
  using Base::parent_of;
  using Base::right;
  using Base::root_;
  using Base::rotate;
  using Base::size_;

  // Null leaves count as black.
  static bool is_red(Node* node) { return node != nullptr && Base::bit(node); }
  static void set_red(Node* node, bool red) { Base::set_bit(node, red); }

  // `node` is red; its parent may be red too. Push the violation upward.
  void repair_after_insert(Node* node) {
    for (;;) {
      Node* parent = parent_of(node);
      if (parent == nullptr) {
        set_red(node, false);
        return;
      }
      if (!is_red(parent)) return;
      Node* grandparent = parent_of(parent);  // exists: a red node is not the root
      const int side = parent == left(grandparent) ? kLeft : kRight;
      Node* uncle = child(grandparent, 1 - side);
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

  // Paths through `node` (possibly null, child of `parent`) lack one black.
  void repair_after_erase(Node* node, Node* parent) {
    while (node != root_ && !is_red(node)) {
      // The sibling exists: its side has black height of at least one.
      const int side = node == left(parent) ? kLeft : kRight;
      Node* sibling = child(parent, 1 - side);
      if (is_red(sibling)) {
        set_red(sibling, false);
        set_red(parent, true);
        rotate(parent, side);
        sibling = child(parent, 1 - side);
      }
      if (!is_red(left(sibling)) && !is_red(right(sibling))) {
        set_red(sibling, true);
        node = parent;
        parent = parent_of(node);
        continue;
      }
      if (!is_red(child(sibling, 1 - side))) {  // only the inner nephew is red
        set_red(child(sibling, side), false);
        set_red(sibling, true);
        rotate(sibling, 1 - side);
        sibling = child(parent, 1 - side);
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
