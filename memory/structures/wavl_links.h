// Intrusive weak-AVL tree links, embedded in any node type that a WavlTree
// orders. Kept apart from wavl_tree.h so node headers stay light.
#pragma once

#include <cstdint>

namespace runsel {

template <class Node>
struct WavlLinks {
  Node* left;
  Node* right;
  // Parent pointer with the parity of the node's rank in bit 0. Nodes are at
  // least 2-byte aligned, so the bit is free.
  std::uintptr_t parent_and_parity;

  std::uintptr_t& parent_word() { return parent_and_parity; }
};

}  // namespace runsel
