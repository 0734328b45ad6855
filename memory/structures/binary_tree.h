// What RbTree and WavlTree share: an intrusive binary search tree. Its links
// are left, right and a parent pointer with one spare bit (the colour, or the
// rank parity); it keeps its root, cached minimum and size. It holds
// everything that does not depend on how it is balanced: insert() and erase()
// (linking a new leaf, unlinking a node), walks, lookups, rotations, and
// check()'s walk. The tree that derives from it (`Tree`, passed in so the
// calls bind statically) supplies only its balancing:
//   kNewLeafBit                  the bit a new leaf gets.
//   repair_after_insert(node)    rebalances after `node` was linked as a leaf.
//   erase_debt(unlinked)         what taking out `unlinked` (the node erase()
//                                unlinks physically, see node_to_unlink) owes
//                                the balance, read before it is unlinked.
//   repair_after_erase(hole, hole_parent, debt)
//                                pays it, from where the node was unlinked.
//   kMissingFigure, check_rule   check()'s figure of a missing child and its
//                                rule at each node (see check_walk).
//
// Links are verified where the Rep says how (structures/verified_links.h).
// insert, erase, their repairs, rotations and next()/previous() check every
// link they read before following it: a node of the tree, whose parent has
// it as a child and whose children name it as parent. They abort naming the
// node when one does not. The exception: the insert repairs climb, unchecked,
// the path insert()'s descent has just verified (path_parent).
// check_walk() and first_not_below() do not check.
//
// Complexity: next() and previous() amortised O(1); first_not_below() and
// the descent of link_leaf() O(height); check_walk() O(n).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "platform/assert.h"
#include "structures/check_failed.h"
#include "structures/tree_links.h"
#include "structures/verified_links.h"

namespace runsel {

// Rep::links(node) gives the node's embedded TreeLinks; Rep::less is a
// strict total order (two distinct nodes never compare equal). A Rep may also
// define static on_rotate() (tests count rotations with it; it costs nothing
// when absent), and linked() to have the links it follows verified
// (structures/verified_links.h).
template <class Rep, class Node>
concept TreeRep = OrderedRep<Rep, Node, TreeLinks<Node>>;

template <class Tree, class Node, class Rep>
requires TreeRep<Rep, Node>
class BinaryTree {
 public:
  void insert(Node* node) {
    link_leaf(node, Tree::kNewLeafBit);
    static_cast<Tree*>(this)->repair_after_insert(node);
  }

  void erase(Node* node) {
    // A member: its parent links to it, or it is the root (checked_parent
    // verifies that when the Rep verifies links).
    if constexpr (!kVerifies) {
      RUNSEL_ASSERT(parent_of(node) != nullptr
                        ? left(parent_of(node)) == node || right(parent_of(node)) == node
                        : root_ == node);
    }
    if (node == first_) {
      erase_first();
    } else {
      erase_inner(node);
    }
    if constexpr (kVerifies) clear_links(node);
  }

  // Verifies every invariant (check_walk's, and the tree's own rule); on the
  // first violation sets *why and returns false. Safe against cycles and
  // over-deep paths (see check_walk), not against links to foreign memory.
  bool check(const char** why) const {
    return check_walk(why, Tree::kMissingFigure, &Tree::check_rule);
  }

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

  static TreeLinks<Node>& links(Node* node) { return Rep::links(node); }
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
  // Whether the Rep has the links verified (structures/verified_links.h).
  static constexpr bool kVerifies = VerifiesLinks<Rep, Node>;

  // The child of `node` on side `dir`, verified before anything follows it:
  // null, or a node of the tree whose parent is `node`.
  static Node* checked_child(Node* node, int dir) {
    Node* kid = verified_link<Rep>(node, child(node, dir));
    if constexpr (kVerifies) {
      if (kid != nullptr) verify_agrees<Rep>(parent_of(kid) == node, node, kid);
    }
    return kid;
  }
  // A child the balance rule says exists (the child a rotation raises, the
  // sibling in the erase repairs): checked_child, and fatal when missing.
  static Node* present_child(Node* node, int dir) {
    Node* kid = checked_child(node, dir);
    if constexpr (kVerifies) {
      if (kid == nullptr) [[unlikely]]
        container_links_damaged(node);
    }
    return kid;
  }
  // The parent of `node`, verified: a node of the tree with `node` as a
  // child, or null when `node` is the root.
  Node* checked_parent(Node* node) const {
    Node* parent = verified_link<Rep>(node, parent_of(node));
    if constexpr (kVerifies) {
      if (parent == nullptr) {
        verify_agrees<Rep>(root_ == node, node, root_);
      } else {
        verify_agrees<Rep>(left(parent) == node || right(parent) == node, node, parent);
      }
    }
    return parent;
  }
  // The parent of `node`, a node on the path insert()'s descent just
  // verified (each reached through checked_child, so its parent link was
  // checked to name the node above it; the new leaf's was just written by
  // link_leaf); the root's parent is null without reading its links. The
  // insert repairs walk up this path and need no second check of it.
  Node* path_parent(Node* node) const { return node == root_ ? nullptr : parent_of(node); }
  // Unlinks an erased node's links, so that a stale link to it (left in a
  // damaged header) finds no back link that agrees.
  static void clear_links(Node* node) {
    TreeLinks<Node>& own = links(node);
    own.left = nullptr;
    own.right = nullptr;
    own.parent_word() = 0;
  }

  // Depth bound of a valid red-black (2 log2 n + 2) or weak-AVL (2 log2 n + 1)
  // tree in a 64-bit address space: check()'s walk keeps at most this many
  // pending nodes.
  static constexpr int kMaxDepth = 130;

  // check()'s walk, whatever the balancing. It verifies what every search tree
  // holds: an empty tree is empty, the root has no parent, every child links
  // back to its parent, exactly size() nodes are reachable, no path is deeper
  // than kMaxDepth, the in-order nodes strictly increase and the first is the
  // cached minimum. It also verifies the balance rule, folded bottom-up.
  // `missing` is the figure of a missing child. rule(node, left, right,
  // &figure, why) derives a node's figure (a black height, a rank) from its
  // children's, or returns check_failed(why, ...). On the first violation sets
  // *why (if why is not null) and returns false. Safe against cycles and
  // over-deep paths (the walk stops after size() nodes or kMaxDepth levels); it
  // does not verify a link before it follows it.
  template <class Rule>
  bool check_walk(const char** why, int missing, Rule rule) const;  // binary_tree_check.h

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
      cursor = checked_child(cursor, dir);
    }
    TreeLinks<Node>& own = links(node);
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
    Node* right_kid = checked_child(node, kRight);
    if (checked_child(node, kLeft) == nullptr || right_kid == nullptr) return node;
    return leftmost(right_kid);
  }

  // Takes `node` (not the cached minimum), whose verified parent is
  // `parent`, out of the tree, unlinking `unlinked` (node_to_unlink(node))
  // from its place; keeps the size. Returns the child that took the unlinked
  // node's place (null or its only child) and sets *hole_parent to that
  // place's parent. The caller rebalances.
  Node* unlink(Node* node, Node* parent, Node* unlinked, Node** hole_parent) {
    --size_;
    Node* hole = checked_child(unlinked, kLeft);
    if (hole == nullptr) hole = checked_child(unlinked, kRight);
    if (unlinked == node) {
      *hole_parent = parent;
      replace_child(parent, node, hole);
      return hole;
    }
    if (parent_of(unlinked) == node) {
      *hole_parent = unlinked;
    } else {
      *hole_parent = parent_of(unlinked);  // verified by node_to_unlink's descent
      replace_child(*hole_parent, unlinked, hole);
      right(unlinked) = right(node);
      set_parent(right(unlinked), unlinked);
    }
    replace_child(parent, node, unlinked);
    left(unlinked) = left(node);
    set_parent(left(unlinked), unlinked);
    set_bit(unlinked, bit(node));
    return hole;
  }

  // erase() of any node but the cached minimum. Out of line, so that erase()
  // stays small enough to inline with its common case, erase_first (with the
  // verified links, the whole of erase() no longer was, and every erase paid
  // a call).
  [[gnu::noinline]] void erase_inner(Node* node) {
    Node* parent = checked_parent(node);
    Node* unlinked = node_to_unlink(node);
    const bool debt = Tree::erase_debt(unlinked);
    Node* hole_parent;
    Node* hole = unlink(node, parent, unlinked, &hole_parent);
    static_cast<Tree*>(this)->repair_after_erase(hole, hole_parent, debt);
  }

  // erase() of the cached minimum, the node the address-ordered containers
  // erase most (their pick fills first): what the general path does, minus
  // node_to_unlink's descent to a successor, since the minimum has no left
  // child. It is unlinked itself, its right child (null, or a leaf in both
  // balanced trees) takes its place and is its successor; else its parent
  // is.
  void erase_first() {
    Node* node = first_;
    if constexpr (kVerifies) {
      if (left(node) != nullptr) [[unlikely]]
        container_links_damaged(node);
    } else {
      RUNSEL_ASSERT(left(node) == nullptr);
    }
    Node* parent = checked_parent(node);
    Node* hole = checked_child(node, kRight);
    const bool debt = Tree::erase_debt(node);
    replace_child(parent, node, hole);
    first_ = hole != nullptr ? leftmost(hole) : parent;
    --size_;
    static_cast<Tree*>(this)->repair_after_erase(hole, parent, debt);
  }

  static Node* leftmost(Node* node) {
    while (Node* lower = checked_child(node, kLeft)) node = lower;
    return node;
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
    Node* riser = present_child(top, 1 - dir);
    Node* moved = checked_child(riser, dir);
    Node* above = checked_parent(top);
    child(top, 1 - dir) = moved;
    if (moved != nullptr) set_parent(moved, top);
    replace_child(above, top, riser);
    child(riser, dir) = top;
    set_parent(top, riser);
  }

  Node* root_ = nullptr;
  Node* first_ = nullptr;  // cached minimum, so first() is O(1)
  std::size_t size_ = 0;

 private:
  // The in-order neighbour on side `dir`: the extreme of that subtree, or
  // the first ancestor reached from that side.
  Node* neighbour(Node* node, int dir) const {
    if (Node* cursor = checked_child(node, dir)) {
      while (Node* further = checked_child(cursor, 1 - dir)) cursor = further;
      return cursor;
    }
    Node* parent = checked_parent(node);
    while (parent != nullptr && node == child(parent, dir)) {
      node = parent;
      parent = checked_parent(node);
    }
    return parent;
  }
};

}  // namespace runsel

#include "structures/binary_tree_check.h"  // check_walk
