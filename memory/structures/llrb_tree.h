// An intrusive left-leaning red-black tree with two-word nodes and no parent
// pointers, the shape of mozjemalloc's tree of non-full runs (RedBlackTree.h,
// once rb.h): a node holds its left child and its right child with the
// node's own colour in the low bit (1 = red). The tree holds its root and its
// size, nothing else: no cached minimum, so first() walks left from the root
// every time, as mozjemalloc's First() did.
//
// Rules (check()):
// - No right child is red.
// - No three red nodes in a row (a 2-3-4 tree: a black node with a red left
//   child whose own left child is red is a 4-node).
// - The root is black.
// - Every path from a node down to a missing child meets as many black nodes.
// - The in-order sequence rises strictly by Rep::less.
//
// insert() and erase() are mozjemalloc's algorithm: one pass down from the
// root, no recursion, no path kept. insert() splits every 4-node it meets on
// the way down, so the new red leaf needs at most one rotation at its parent.
// erase() moves a red link down on the way (move_red_left/move_red_right, a
// transform of its own at the root), so the node it unlinks is never a lone
// black; a node with a right subtree is replaced by its successor, met at
// the bottom of the same descent.
//
// Links are verified where the Rep says how (structures/verified_links.h).
// Every child link insert() and erase() read is checked before it is
// followed. A node the rules say exists (the node to erase on its search
// path, a sibling a transform moves) must be there. Otherwise the call aborts
// naming the node. first() verifies the links it walks too (its result is
// erased next). check() and contains() do not.
//
// Complexity: insert, erase O(log n) (at most 3 log2(n + 1) levels);
// first() O(log n); check() O(n).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/fatal.h"
#include "structures/check_failed.h"
#include "structures/tree_links.h"
#include "structures/verified_links.h"

namespace runsel {

template <class Node, class Rep>
requires OrderedRep<Rep, Node, LlrbLinks<Node>>
class LlrbTree {
 public:
  // A 2-3-4 LLRB of n nodes is at most 3 log2(n + 1) high (a black node and
  // its two red left links per black level); 192 levels hold far more nodes
  // than an address space has pages.
  static constexpr std::size_t kMaxDepth = 192;

  Node* first() const {
    Node* node = root_;
    if (node == nullptr) return nullptr;
    while (Node* below = left_of(node)) node = below;
    return node;
  }
  Node* root() const { return root_; }
  std::size_t size() const { return size_; }

  void insert(Node* node) {
    Place above{};  // where here.parent hangs
    Place here{};   // where `at` hangs
    for (Node* at = root_; at != nullptr;) {
      Node* left = left_of(at);
      Node* left_left = is_red(left) ? left_of(left) : nullptr;
      if (!is_red(left_left)) {
        above = here;
        here = {at, !Rep::less(node, at)};
        at = here.right ? right_of(at) : left;
        continue;
      }
      // `at` tops a 4-node: its left child rises, red, between two blacks.
      // The descent stays at this level (the split may need one more step).
      Node* middle = raise(at, false);
      set_red(left_left, false);
      if (!here.right) {
        hang(here, middle);
        at = middle;
        continue;
      }
      // A red right link: lean it left at the parent, whose place the new
      // top takes; the descent goes on from there.
      set_right(here.parent, middle);
      Node* top = lean_left(here.parent);
      hang(above, top);
      here = {top, !Rep::less(node, top)};
      at = child(top, here.right);
    }
    links(node).left = nullptr;
    links(node).right_and_colour = kRed;  // a new leaf is red
    ++size_;
    if (here.parent == nullptr) {
      root_ = node;
    } else if (here.right) {
      // A red right link, leant left at once: the leaf takes its parent's
      // place and colour, the parent (no right child) becomes its red left.
      Node* parent = here.parent;
      links(node).left = parent;
      set_red(node, is_red(parent));
      set_red(parent, true);
      hang(above, node);
    } else {
      set_left(here.parent, node);
    }
    set_red(root_, false);
  }

  // `node` must be a member: a search path that misses it is fatal.
  void erase(Node* node) {
    Node* at = root_;
    if (at == nullptr) [[unlikely]]
      container_links_damaged(node);
    Place here{};      // where `at` hangs
    Place target{};    // where `node` hangs, once met with a right subtree
    bool met = false;  // whether target is known: its successor replaces it
    for (bool at_root = true;; at_root = false) {
      if (at != node && Rep::less(node, at)) {
        Node* left = left_of(at);
        if (left == nullptr) {
          if (!met) [[unlikely]]
            container_links_damaged(node);  // not on its search path: not a member
          replace(target, node, here, at);  // `at` is node's successor, a red leaf
          break;
        }
        if (is_red(left) || is_red(left_of(left))) {
          here = {at, false};
          at = left;
          continue;
        }
        Node* top = move_red_left(at);
        if (at_root) set_red(top, false);
        hang(here, top);
        at = top;
        continue;
      }
      if (at == node) {
        if (right(at) == nullptr) {  // a leaf level: its red left child (if any) takes its place
          Node* left = left_of(at);
          if (left != nullptr) set_red(left, is_red(at));
          hang(here, left);
          break;
        }
        met = true;
        target = here;
      }
      Node* right = right_of(at);
      if (right == nullptr) [[unlikely]]
        container_links_damaged(node);
      if (is_red(left_of(right))) {
        here = {at, true};
        at = right;
        continue;
      }
      Node* top = at_root ? move_red_right_at_root(at) : move_red_right(at);
      hang(here, top);
      at = top;
    }
    --size_;
    if constexpr (VerifiesLinks<Rep, Node>) {
      links(node).left = nullptr;  // a stale link to it finds no children
      links(node).right_and_colour = 0;
    }
  }

  // Walks the whole tree without recursion or allocation (a stack of at
  // most kMaxDepth nodes) and verifies every rule; safe on a damaged tree
  // (a cycle or a depth beyond kMaxDepth is reported, not followed).
  bool check(const char** why) const {
    if (root_ == nullptr) {
      return size_ == 0 ? true : check_failed(why, "root is null but size() is not zero");
    }
    if (is_red(root_)) return check_failed(why, "root is red");
    struct Frame {
      Node* node;
      int blacks;  // black nodes from the root down to this one, itself included
    };
    Frame stack[kMaxDepth];
    std::size_t top = 0;
    std::size_t count = 0;
    Node* previous = nullptr;
    int leaf_blacks = -1;  // the black count every missing child must see
    auto missing_child = [&](int blacks) {
      if (leaf_blacks < 0) leaf_blacks = blacks;
      return leaf_blacks == blacks;
    };
    Node* at = root_;
    int blacks_above = 0;
    while (at != nullptr || top != 0) {
      for (; at != nullptr; at = left(at)) {
        if (is_red(right(at))) return check_failed(why, "a right child is red");
        if (is_red(at) && is_red(left(at)) && is_red(left(left(at)))) {
          return check_failed(why, "three red nodes in a row");
        }
        const int blacks = blacks_above + (is_red(at) ? 0 : 1);
        if (left(at) == nullptr && !missing_child(blacks)) {
          return check_failed(why, "black heights differ");
        }
        if (top == kMaxDepth) return check_failed(why, "tree deeper than kMaxDepth");
        stack[top++] = {at, blacks};
        blacks_above = blacks;
      }
      const Frame frame = stack[--top];
      if (++count > size_) return check_failed(why, "more nodes reachable than size()");
      if (previous != nullptr && !Rep::less(previous, frame.node)) {
        return check_failed(why, "in-order nodes not strictly increasing");
      }
      previous = frame.node;
      if (right(frame.node) == nullptr && !missing_child(frame.blacks)) {
        return check_failed(why, "black heights differ");
      }
      at = right(frame.node);
      blacks_above = frame.blacks;
    }
    if (count != size_) return check_failed(why, "fewer nodes reachable than size()");
    return true;
  }

  // Whether `node` is on its search path (a member), without verifying links.
  bool contains(const Node* node) const {
    for (Node* at = root_; at != nullptr;) {
      if (at == node) return true;
      at = Rep::less(node, at) ? left(at) : right(at);
    }
    return false;
  }

 private:
  static constexpr std::uintptr_t kRed = 1;

  // Where a subtree hangs: its parent and side, or the root (parent null).
  struct Place {
    Node* parent = nullptr;
    bool right = false;
  };
  void hang(Place place, Node* subtree) {
    if (place.parent == nullptr) {
      root_ = subtree;
    } else {
      set_child(place.parent, place.right, subtree);
    }
  }

  // `successor`, the red leaf hanging at `from`, takes the place, children
  // and colour of `node`, which hangs at `to`.
  void replace(Place to, Node* node, Place from, Node* successor) {
    hang(to, successor);
    links(successor) = links(node);
    set_child(from.parent, from.right, nullptr);
  }

  static LlrbLinks<Node>& links(Node* node) { return Rep::links(node); }
  static Node* left(Node* node) { return links(node).left; }
  static Node* right(Node* node) {
    return reinterpret_cast<Node*>(links(node).right_and_colour & ~kRed);
  }
  static bool is_red(Node* node) {
    return node != nullptr && (links(node).right_and_colour & kRed);
  }
  static void set_red(Node* node, bool red) {
    std::uintptr_t& word = links(node).right_and_colour;
    word = (word & ~kRed) | (red ? kRed : 0);
  }
  static void set_left(Node* node, Node* child) { links(node).left = child; }
  static void set_right(Node* node, Node* child) {
    std::uintptr_t& word = links(node).right_and_colour;
    word = reinterpret_cast<std::uintptr_t>(child) | (word & kRed);
  }
  static void set_child(Node* node, bool right, Node* to) {
    if (right) return set_right(node, to);
    set_left(node, to);
  }
  // A child, verified before anything reads it: insert(), erase(), first()
  // and the transforms below read children through these; check() and
  // contains() do not.
  static Node* left_of(Node* node) { return verified_link<Rep>(node, left(node)); }
  static Node* right_of(Node* node) { return verified_link<Rep>(node, right(node)); }
  static Node* child(Node* node, bool right) { return right ? right_of(node) : left_of(node); }
  // A child the rules say exists: a missing one means damaged links.
  static Node* present(Node* node, Node* child) {
    if (child == nullptr) [[unlikely]]
      container_links_damaged(node);
    return child;
  }

  // A rotation that keeps every colour: node's child on the raised side
  // takes node's place, node becomes its child on the other side. Returns
  // the subtree's new top.
  static Node* raise(Node* node, bool right_side) {
    Node* up = present(node, child(node, right_side));
    set_child(node, right_side, child(up, !right_side));
    set_child(up, !right_side, node);
    return up;
  }
  // A red right link turned left: the right child takes node's colour.
  static Node* lean_left(Node* node) {
    Node* up = raise(node, true);
    set_red(up, is_red(node));
    set_red(node, true);
    return up;
  }

  // The transforms erase() applies before it descends into a child that is
  // a lone black (a 2-node): they borrow a red link from the node, which
  // the descent made red or part of a 3- or 4-node. Each returns the
  // subtree's new top. Towards the left: `node` is red, its left child and
  // left grandchild black.
  static Node* move_red_left(Node* node) {
    set_red(present(node, left_of(node)), true);
    Node* right = present(node, right_of(node));
    if (!is_red(left_of(right))) {
      set_red(node, true);
      return raise(node, true);
    }
    set_right(node, raise(right, false));
    Node* top = raise(node, true);
    Node* below = right_of(node);
    if (!is_red(below)) {
      set_red(node, false);
      return top;
    }
    set_red(below, false);
    set_red(node, true);
    set_left(top, raise(node, true));
    return top;
  }
  // Towards the right: node's right child has a black left child.
  static Node* move_red_right(Node* node) {
    Node* left = present(node, left_of(node));
    if (!is_red(left)) {
      set_red(left, true);
      Node* left_left = left_of(left);
      if (!is_red(left_left)) return raise(node, true);
      set_red(left_left, false);
      return raised_both_ways(node);
    }
    Node* middle = present(left, right_of(left));
    Node* middle_left = left_of(middle);
    if (is_red(middle_left)) {
      set_red(middle, is_red(node));
      set_red(middle_left, false);
      set_left(node, raise(left, true));
    } else {
      set_red(left, is_red(node));
      set_red(middle, true);
    }
    Node* top = raised_both_ways(node);
    set_red(node, true);
    return top;
  }
  // The root has no red link above it to borrow: with a black left child it
  // turns red itself first.
  static Node* move_red_right_at_root(Node* node) {
    Node* left = present(node, left_of(node));
    if (is_red(left)) return move_red_right(node);
    set_red(node, true);
    Node* left_left = left_of(left);
    if (!is_red(left_left)) {
      set_red(left, true);
      return raise(node, true);
    }
    set_red(left_left, false);
    return raised_both_ways(node);
  }
  // Node's left child rises to the top, and node's right child takes node's
  // place below it, node as its left child.
  static Node* raised_both_ways(Node* node) {
    Node* top = raise(node, false);
    set_right(top, raise(node, true));
    return top;
  }

  Node* root_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace runsel
