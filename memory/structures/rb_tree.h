// Intrusive red-black tree over nodes that embed RbLinks<Node>; the order and
// the place of the links come from a representation type Rep (see RbRep).
//
// Complexity: insert and erase are O(log n), iterative, and never allocate;
// first() is O(1) (the minimum is cached and repaired on insert/erase, which
// costs one successor step when the minimum itself is erased); next() and
// previous() are amortised O(1); first_not_below() is O(log n); check() is O(n).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "structures/rb_links.h"

namespace runsel {

// Rep::links(node) gives the node's embedded links; Rep::less is a strict total
// order (two distinct nodes never compare equal).
template <class Rep, class Node>
concept RbRep = requires(Node* node, const Node* a, const Node* b) {
  { Rep::links(node) } -> std::same_as<RbLinks<Node>&>;
  { Rep::less(a, b) } -> std::same_as<bool>;
};

template <class Node, class Rep>
requires RbRep<Rep, Node>
class RbTree {
 public:
  // Depth bound for any valid tree in a 64-bit address space (2*log2(n)+2).
  static constexpr int kMaxDepth = 128;

  Node* root() const { return root_; }
  Node* first() const { return first_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  void insert(Node* node) {
    Node* parent = nullptr;
    Node* cursor = root_;
    int dir = kLeft;
    bool is_new_minimum = true;
    while (cursor != nullptr) {
      parent = cursor;
      dir = Rep::less(node, cursor) ? kLeft : kRight;
      if (dir == kRight) is_new_minimum = false;
      cursor = child(cursor, dir);
    }
    RbLinks<Node>& own = links(node);
    own.left = nullptr;
    own.right = nullptr;
    own.parent_and_color = reinterpret_cast<std::uintptr_t>(parent) | kRedBit;
    if (parent == nullptr) {
      root_ = node;
    } else {
      child(parent, dir) = node;
    }
    if (is_new_minimum) first_ = node;
    ++size_;
    repair_after_insert(node);
  }

  void erase(Node* node) {
    if (node == first_) first_ = next(node);
    --size_;
    // `hole` takes the place of the node physically unlinked (null or one
    // child); if that node was black, the path through `hole` lacks a black.
    Node* hole;
    Node* hole_parent;
    bool removed_black;
    if (left(node) == nullptr || right(node) == nullptr) {
      hole = left(node) != nullptr ? left(node) : right(node);
      hole_parent = parent_of(node);
      removed_black = !is_red(node);
      replace_child(hole_parent, node, hole);
    } else {
      // Two children: the successor (leftmost of the right subtree, which has
      // no left child) takes the node's place and colour.
      Node* successor = right(node);
      while (left(successor) != nullptr) successor = left(successor);
      removed_black = !is_red(successor);
      hole = right(successor);
      if (parent_of(successor) == node) {
        hole_parent = successor;
      } else {
        hole_parent = parent_of(successor);
        replace_child(hole_parent, successor, hole);
        right(successor) = right(node);
        set_parent(right(successor), successor);
      }
      replace_child(parent_of(node), node, successor);
      left(successor) = left(node);
      set_parent(left(successor), successor);
      set_red(successor, is_red(node));
    }
    if (removed_black) repair_after_erase(hole, hole_parent);
  }

  // In-order successor, or nullptr after the maximum.
  Node* next(Node* node) const {
    if (right(node) != nullptr) {
      Node* cursor = right(node);
      while (left(cursor) != nullptr) cursor = left(cursor);
      return cursor;
    }
    Node* parent = parent_of(node);
    while (parent != nullptr && node == right(parent)) {
      node = parent;
      parent = parent_of(node);
    }
    return parent;
  }

  // In-order predecessor, or nullptr before the minimum.
  Node* previous(Node* node) const {
    if (left(node) != nullptr) {
      Node* cursor = left(node);
      while (right(cursor) != nullptr) cursor = right(cursor);
      return cursor;
    }
    Node* parent = parent_of(node);
    while (parent != nullptr && node == left(parent)) {
      node = parent;
      parent = parent_of(node);
    }
    return parent;
  }

  // The lowest node for which is_below(node) is false; is_below must be true
  // on a prefix of the order (e.g. "smaller than the request" for best fit).
  template <class IsBelow>
  requires std::predicate<IsBelow&, Node*> Node* first_not_below(IsBelow is_below) const {
    Node* best = nullptr;
    Node* cursor = root_;
    while (cursor != nullptr) {
      if (is_below(cursor)) {
        cursor = right(cursor);
      } else {
        best = cursor;
        cursor = left(cursor);
      }
    }
    return best;
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
  static constexpr int kLeft = 0;
  static constexpr int kRight = 1;
  static constexpr std::uintptr_t kRedBit = 1;

  static RbLinks<Node>& links(Node* node) { return Rep::links(node); }
  static Node*& child(Node* node, int dir) {
    return dir == kLeft ? links(node).left : links(node).right;
  }
  static Node*& left(Node* node) { return links(node).left; }
  static Node*& right(Node* node) { return links(node).right; }
  static Node* parent_of(Node* node) {
    return reinterpret_cast<Node*>(links(node).parent_and_color & ~kRedBit);
  }
  static void set_parent(Node* node, Node* parent) {
    std::uintptr_t& word = links(node).parent_and_color;
    word = reinterpret_cast<std::uintptr_t>(parent) | (word & kRedBit);
  }
  // Null leaves count as black.
  static bool is_red(Node* node) {
    return node != nullptr && (links(node).parent_and_color & kRedBit) != 0;
  }
  static void set_red(Node* node, bool red) {
    std::uintptr_t& word = links(node).parent_and_color;
    word = (word & ~kRedBit) | (red ? kRedBit : 0);
  }
  static bool fail(const char** why, const char* reason) {
    *why = reason;
    return false;
  }

  // Puts `replacement` (may be null) where `old` hangs below `parent`.
  void replace_child(Node* parent, Node* old, Node* replacement) {
    if (parent == nullptr) {
      root_ = replacement;
    } else if (left(parent) == old) {
      left(parent) = replacement;
    } else {
      right(parent) = replacement;
    }
    if (replacement != nullptr) set_parent(replacement, parent);
  }

  // `top` moves down to side `dir`; its child on the other side rises.
  void rotate(Node* top, int dir) {
    Node* riser = child(top, 1 - dir);
    Node* moved = child(riser, dir);
    child(top, 1 - dir) = moved;
    if (moved != nullptr) set_parent(moved, top);
    replace_child(parent_of(top), top, riser);
    child(riser, dir) = top;
    set_parent(top, riser);
  }

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

  Node* root_ = nullptr;
  Node* first_ = nullptr;  // cached minimum, so first() is O(1)
  std::size_t size_ = 0;
};

}  // namespace runsel
