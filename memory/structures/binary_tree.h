// What RbTree and WavlTree share: an intrusive binary search tree whose links
// are left, right and a parent pointer with one spare bit (the colour, or the
// rank parity), its root, cached minimum and size, and the parts that do not
// depend on how it is balanced: walks, lookups, linking a new leaf,
// unlinking a node, rotations.
//
// Complexity: next() and previous() amortised O(1); first_not_below() and
// the descent of link_leaf() O(height).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "platform/assert.h"

namespace runsel {

// Rep::links(node) gives the node's embedded Links (with left, right and
// parent_word()); Rep::less is a strict total order (two distinct nodes never
// compare equal). A Rep may also define static on_rotate() (tests count
// rotations with it; it costs nothing when absent).
template <class Rep, class Node, class Links>
concept TreeRep = requires(Node* node, const Node* a, const Node* b) {
  { Rep::links(node) } -> std::same_as<Links&>;
  { Rep::less(a, b) } -> std::same_as<bool>;
};

template <class Node, class Rep, class Links>
requires TreeRep<Rep, Node, Links>
class BinaryTree {
 public:
  Node* root() const { return root_; }
  Node* first() const { return first_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // In-order successor, or nullptr after the maximum.
  Node* next(Node* node) const { return neighbour(node, kRight); }
  // In-order predecessor, or nullptr before the minimum.
  Node* previous(Node* node) const { return neighbour(node, kLeft); }

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

 protected:
  static constexpr int kLeft = 0;
  static constexpr int kRight = 1;
  static constexpr std::uintptr_t kBit = 1;

  static Links& links(Node* node) { return Rep::links(node); }
  static Node*& child(Node* node, int dir) {
    return dir == kLeft ? links(node).left : links(node).right;
  }
  static Node*& left(Node* node) { return links(node).left; }
  static Node*& right(Node* node) { return links(node).right; }
  static Node* parent_of(Node* node) {
    return reinterpret_cast<Node*>(links(node).parent_word() & ~kBit);
  }
  static void set_parent(Node* node, Node* parent) {
    std::uintptr_t& word = links(node).parent_word();
    word = reinterpret_cast<std::uintptr_t>(parent) | (word & kBit);
  }
  static bool bit(Node* node) { return (links(node).parent_word() & kBit) != 0; }
  static void set_bit(Node* node, bool value) {
    std::uintptr_t& word = links(node).parent_word();
    word = (word & ~kBit) | (value ? kBit : 0);
  }
  static bool fail(const char** why, const char* reason) {
    *why = reason;
    return false;
  }

  // Links `node` as a leaf where the order puts it, its bit set to `leaf_bit`;
  // keeps the cached minimum and the size. The caller rebalances.
  void link_leaf(Node* node, bool leaf_bit) {
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
    Links& own = links(node);
    own.left = nullptr;
    own.right = nullptr;
    own.parent_word() = reinterpret_cast<std::uintptr_t>(parent) | (leaf_bit ? kBit : 0);
    if (parent == nullptr) {
      root_ = node;
    } else {
      child(parent, dir) = node;
    }
    if (is_new_minimum) first_ = node;
    ++size_;
  }

  // The node erase() unlinks physically: `node` itself when it has at most
  // one child, else its successor (the leftmost of its right subtree, with
  // no left child), which then takes node's place and bit.
  static Node* node_to_unlink(Node* node) {
    if (left(node) == nullptr || right(node) == nullptr) return node;
    Node* successor = right(node);
    while (left(successor) != nullptr) successor = left(successor);
    return successor;
  }

  // Takes `node` out of the tree, unlinking `unlinked` (node_to_unlink(node))
  // from its place; keeps the cached minimum and the size. Returns the child
  // that took the unlinked node's place (null or its only child) and sets
  // *hole_parent to that place's parent. The caller rebalances.
  Node* unlink(Node* node, Node* unlinked, Node** hole_parent) {
    // A member: its parent links to it, or it is the root.
    RUNSEL_ASSERT(parent_of(node) != nullptr
                      ? left(parent_of(node)) == node || right(parent_of(node)) == node
                      : root_ == node);
    if (node == first_) first_ = next(node);
    --size_;
    Node* hole = left(unlinked) != nullptr ? left(unlinked) : right(unlinked);
    if (unlinked == node) {
      *hole_parent = parent_of(node);
      replace_child(*hole_parent, node, hole);
      return hole;
    }
    if (parent_of(unlinked) == node) {
      *hole_parent = unlinked;
    } else {
      *hole_parent = parent_of(unlinked);
      replace_child(*hole_parent, unlinked, hole);
      right(unlinked) = right(node);
      set_parent(right(unlinked), unlinked);
    }
    replace_child(parent_of(node), node, unlinked);
    left(unlinked) = left(node);
    set_parent(left(unlinked), unlinked);
    set_bit(unlinked, bit(node));
    return hole;
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
    if constexpr (requires { Rep::on_rotate(); }) Rep::on_rotate();
    Node* riser = child(top, 1 - dir);
    Node* moved = child(riser, dir);
    child(top, 1 - dir) = moved;
    if (moved != nullptr) set_parent(moved, top);
    replace_child(parent_of(top), top, riser);
    child(riser, dir) = top;
    set_parent(top, riser);
  }

  Node* root_ = nullptr;
  Node* first_ = nullptr;  // cached minimum, so first() is O(1)
  std::size_t size_ = 0;

 private:
  // The in-order neighbour on side `dir`: the extreme of that subtree, or
  // the first ancestor reached from that side.
  static Node* neighbour(Node* node, int dir) {
    if (child(node, dir) != nullptr) {
      Node* cursor = child(node, dir);
      while (child(cursor, 1 - dir) != nullptr) cursor = child(cursor, 1 - dir);
      return cursor;
    }
    Node* parent = parent_of(node);
    while (parent != nullptr && node == child(parent, dir)) {
      node = parent;
      parent = parent_of(node);
    }
    return parent;
  }
};

}  // namespace runsel
