// Intrusive red-black tree links, embedded in any node type that an RbTree
// orders. Kept apart from rb_tree.h so node headers stay light.
#pragma once

#include <cstdint>

namespace runsel {

template <class Node>
struct RbLinks {
  Node* left;
  Node* right;
  // Parent pointer with the node's colour in bit 0 (1 = red). Nodes are at
  // least 2-byte aligned, so the bit is free.
  std::uintptr_t parent_and_color;

  std::uintptr_t& parent_word() { return parent_and_color; }
};

}  // namespace runsel
