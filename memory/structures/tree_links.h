// Intrusive binary-tree links, embedded in any node type that an RbTree, a
// WavlTree or an LlrbTree orders. Kept apart from the trees so node headers stay light.
#pragma once

#include <cstdint>

namespace runsel {

template <class Node>
struct TreeLinks {
  Node* left;
  Node* right;
  // Parent pointer with one bit of balance in bit 0: the colour in an RbTree
  // (1 = red), the parity of the rank in a WavlTree. Nodes are at least
  // 2-byte aligned, so the bit is free.
  std::uintptr_t parent_and_bit;

  std::uintptr_t& parent_word() { return parent_and_bit; }
};

// Two words, for an LlrbTree (no parent pointer): the left child, and the
// right child with the node's own colour in bit 0 (1 = red).
template <class Node>
struct LlrbLinks {
  Node* left;
  std::uintptr_t right_and_colour;
};

}  // namespace runsel
