// Intrusive binary-tree links, embedded in any node type that an RbTree or a
// WavlTree orders. Kept apart from the trees so node headers stay light.
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

}  // namespace runsel
