// check()'s walk of a BinaryTree (structures/binary_tree.h), defined out of
// the class so that the tree's header stays the tree's operations. Included at
// the end of binary_tree.h; not meant to be included on its own.
#pragma once

#include <cstddef>

#include "structures/binary_tree.h"

namespace runsel {

template <class Tree, class Node, class Rep>
requires TreeRep<Rep, Node>
template <class Rule>
bool BinaryTree<Tree, Node, Rep>::check_walk(const char** why, int missing, Rule rule) const {
  const char* ignored;
  if (why == nullptr) why = &ignored;
  if (root_ == nullptr) {
    if (size_ != 0) return check_failed(why, "root is null but size() is not zero");
    if (first_ != nullptr) return check_failed(why, "cached first is set in an empty tree");
    return true;
  }
  if (parent_of(root_) != nullptr) return check_failed(why, "root has a parent");

  // Pre-order on the way down (links, count, depth), in-order between a
  // node's subtrees (the order), post-order on the way up (the rule). Each
  // stack entry is a node whose subtrees are not finished.
  struct Pending {
    Node* node;
    int stage;  // 0: left subtree next, 1: right subtree next
    int left;   // the left child's figure, once known
  };
  Pending stack[kMaxDepth];
  int top = 0;
  std::size_t count = 0;
  Node* previous = nullptr;
  Node* node = root_;
  int finished = missing;  // figure of the subtree just completed
  for (;;) {
    if (node != nullptr) {
      if (++count > size_) return check_failed(why, "more nodes reachable than size()");
      for (int dir = kLeft; dir <= kRight; ++dir) {
        Node* kid = child(node, dir);
        if (kid != nullptr && parent_of(kid) != node) {
          return check_failed(why, "child's parent pointer is wrong");
        }
      }
      if (top == kMaxDepth) return check_failed(why, "tree deeper than kMaxDepth");
      stack[top++] = {node, 0, missing};
      node = left(node);
      continue;
    }
    // An empty subtree, or a finished one, was just left: hand its figure
    // to the node above.
    if (top == 0) break;
    Pending& above = stack[top - 1];
    if ((above.stage == 0 ? left(above.node) : right(above.node)) == nullptr) finished = missing;
    if (above.stage == 0) {
      above.left = finished;
      if (previous == nullptr) {
        if (first_ != above.node) return check_failed(why, "cached first is not the minimum");
      } else if (!Rep::less(previous, above.node)) {
        return check_failed(why, "in-order nodes not strictly increasing");
      }
      previous = above.node;
      above.stage = 1;
      node = right(above.node);
      continue;
    }
    if (!rule(above.node, above.left, finished, &finished, why)) return false;
    --top;
  }
  if (count != size_) return check_failed(why, "fewer nodes reachable than size()");
  return true;
}

}  // namespace runsel
