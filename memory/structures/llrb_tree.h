// An intrusive left-leaning red-black tree (2-3 variant) with two-word nodes
// and no parent pointers, the shape of mozjemalloc's tree of non-full runs
// (RedBlackTree.h, once rb.h): a node holds its left child and its right
// child with the node's own colour in the low bit (1 = red). The tree holds
// its root and its size, nothing else: no cached minimum, so first() walks
// left from the root every time, as mozjemalloc's First() did.
//
// Rules (check()): no right child is red; no red node has a red left child;
// the root is black; every path from a node down to a missing child meets as
// many black nodes; the in-order sequence rises strictly by Rep::less.
//
// insert() and erase() are iterative (no recursion): the descent from the
// root records its path (at most kMaxDepth nodes, on the stack), erase()
// moves a red link down on the way (Sedgewick's moveRedLeft/moveRedRight, so
// the node unlinked is never a lone black), and the balance is restored on
// the way back up that path. mozjemalloc's macros restore it during the one
// descent instead ("top-down"); the order, and so first(), is the same
// whatever the balancing, only the instruction count differs.
//
// Links are verified where the Rep says how (structures/verified_links.h):
// every child link insert() and erase() read is checked before it is
// followed, and a node the rules say exists (a child of a black node whose
// sibling is black, the node to erase on its search path) is there, or the
// call aborts naming the node; first() verifies the links it walks too (its
// result is erased next). check() and contains() do not.
//
// Complexity: insert, erase O(log n) (at most 2 log2(n + 1) levels);
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
  // A 2-3 LLRB of n nodes is at most 2 log2(n + 1) high; 96 levels hold far
  // more nodes than an address space has pages.
  static constexpr std::size_t kMaxDepth = 96;

  Node* first() const {
    Node* node = root_;
    if (node == nullptr) return nullptr;
    while (Node* below = left_of(node)) node = below;
    return node;
  }
  Node* root() const { return root_; }
  std::size_t size() const { return size_; }

  void insert(Node* node) {
    Path path;
    for (Node* at = root_; at != nullptr;) {
      const bool right_side = !Rep::less(node, at);
      path.push(at, right_side);
      at = right_side ? right_of(at) : left_of(at);
    }
    links(node).left = nullptr;
    links(node).right_and_colour = kRed;  // a new leaf is red
    ++size_;
    rebuild(path, node, path.depth, nullptr);
  }

  // `node` must be a member: a search path that misses it is fatal.
  void erase(Node* node) {
    Node* at = root_;
    if (at == nullptr) [[unlikely]]
      container_links_damaged(node);
    // The root's links are red for the descent when both its children are black.
    if (!is_red(left_of(at)) && !is_red(right_of(at))) set_red(at, true);
    Path path;
    std::size_t replaced = kMaxDepth;  // the level where `node` is replaced by its successor
    Node* successor = nullptr;
    for (;;) {
      if (Rep::less(node, at)) {
        Node* below = left_of(at);
        if (below == nullptr) [[unlikely]]
          container_links_damaged(node);  // not on its search path: not a member
        if (!is_red(below) && !is_red(left_of(below))) at = move_red_left(at);
        path.push(at, false);
        at = left_of(at);
        continue;
      }
      if (is_red(left_of(at))) at = rotate_right(at);
      if (at == node && right_of(at) == nullptr) break;  // a red leaf (or the last node): gone
      Node* below = right_of(at);
      if (below == nullptr) [[unlikely]]
        container_links_damaged(node);
      if (!is_red(below) && !is_red(left_of(below))) at = move_red_right(at);
      if (at != node) {
        path.push(at, true);
        at = right_of(at);
        continue;
      }
      // `node` has a right subtree: its minimum takes node's place.
      replaced = path.depth;
      path.push(at, true);
      Node* min = right_of(at);
      while (left_of(min) != nullptr) {
        if (!is_red(left_of(min)) && !is_red(left_of(left_of(min)))) min = move_red_left(min);
        path.push(min, false);
        min = left_of(min);
      }
      successor = min;
      break;
    }
    --size_;
    rebuild(path, nullptr, replaced, successor);
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
        if (is_red(at) && is_red(left(at))) {
          return check_failed(why, "a red node has a red left child");
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

  // The nodes from the root down to where the call stopped, each with the
  // side the descent left it by.
  struct Path {
    Node* nodes[kMaxDepth];
    bool right_side[kMaxDepth];
    std::size_t depth = 0;
    void push(Node* node, bool right) {
      if (depth == kMaxDepth) [[unlikely]]
        container_links_damaged(node);  // deeper than any valid tree: a cycle
      nodes[depth] = node;
      right_side[depth++] = right;
    }
  };

  static LlrbLinks<Node>& links(Node* node) { return Rep::links(node); }
  static Node* left(Node* node) { return links(node).left; }
  static Node* right(Node* node) {
    return reinterpret_cast<Node*>(links(node).right_and_colour & ~kRed);
  }
  static bool is_red(Node* node) { return node != nullptr && (links(node).right_and_colour & kRed); }
  static void set_red(Node* node, bool red) {
    std::uintptr_t& word = links(node).right_and_colour;
    word = (word & ~kRed) | (red ? kRed : 0);
  }
  static void set_left(Node* node, Node* child) { links(node).left = child; }
  static void set_right(Node* node, Node* child) {
    std::uintptr_t& word = links(node).right_and_colour;
    word = reinterpret_cast<std::uintptr_t>(child) | (word & kRed);
  }
  // `link`, read from `from`, once the Rep accepts it.
  static Node* checked(Node* from, Node* link) { return verified_link<Rep>(from, link); }
  // A child, verified before anything reads it: insert(), erase(), first()
  // and the rebalancing steps below (rotate, flip, the moves, balance) read
  // children through these; check() and contains() do not.
  static Node* left_of(Node* node) { return checked(node, left(node)); }
  static Node* right_of(Node* node) { return checked(node, right(node)); }

  // The LLRB steps: rotate, flip, Sedgewick's moves and balance; all but
  // flip return the subtree's new top.
  // A rotation: `up`, node's child on the raised side, takes node's place
  // and colour, and node becomes its red child on the other side.
  static Node* child(Node* node, bool right) { return right ? right_of(node) : left_of(node); }
  static void set_child(Node* node, bool right, Node* to) {
    if (right) return set_right(node, to);
    set_left(node, to);
  }
  static Node* rotate(Node* node, bool raise_right) {
    Node* up = child(node, raise_right);
    set_child(node, raise_right, child(up, !raise_right));
    set_child(up, !raise_right, node);
    set_red(up, is_red(node));
    set_red(node, true);
    return up;
  }
  static Node* rotate_left(Node* node) { return rotate(node, true); }
  static Node* rotate_right(Node* node) { return rotate(node, false); }

  // Both children exist: the rules say so wherever this is called.
  static void flip(Node* node) {
    Node* l = left_of(node);
    Node* r = right_of(node);
    if (l == nullptr || r == nullptr) [[unlikely]]
      container_links_damaged(node);
    set_red(node, !is_red(node));
    set_red(l, !is_red(l));
    set_red(r, !is_red(r));
  }
  // Sedgewick's moves: make the child on the descent's side (or one of its
  // children) red before the descent enters it.
  static Node* move_red_left(Node* node) {
    flip(node);
    if (!is_red(left_of(right_of(node)))) return node;
    set_right(node, rotate_right(right_of(node)));
    return flipped(rotate_left(node));
  }
  static Node* move_red_right(Node* node) {
    flip(node);
    return is_red(left_of(left_of(node))) ? flipped(rotate_right(node)) : node;
  }
  static Node* flipped(Node* node) {
    flip(node);
    return node;
  }
  static Node* balance(Node* node) {
    if (is_red(right_of(node)) && !is_red(left_of(node))) node = rotate_left(node);
    if (is_red(left_of(node)) && is_red(left_of(left_of(node)))) node = rotate_right(node);
    if (is_red(left_of(node)) && is_red(right_of(node))) flip(node);
    return node;
  }

  // Back up `path`: `below` is the new subtree under its last node; at level
  // `replaced` (if below the depth), `successor` takes that node's place.
  void rebuild(const Path& path, Node* below, std::size_t replaced, Node* successor) {
    for (std::size_t level = path.depth; level-- > 0;) {
      Node* node = path.nodes[level];
      if (level == replaced) {
        links(successor) = links(node);  // its children and its colour
        node = successor;
      }
      set_child(node, path.right_side[level], below);
      below = balance(node);
    }
    root_ = below;
    if (root_ != nullptr) set_red(root_, false);
  }

  Node* root_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace runsel
