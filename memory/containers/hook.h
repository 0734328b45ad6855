// The container hook every run header carries. It is one fixed-size union for
// every container, so that the run layout (and therefore every address the
// allocator hands out) is the same whichever container is built in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "structures/rb_links.h"

namespace runsel {

template <class Node>
struct ListLinks {
  Node* prev;
  Node* next;
};

template <class Node>
struct PairingLinks {
  Node* child;  // leftmost child
  Node* next;   // next sibling
  Node* prev;   // previous sibling, or the parent for a leftmost child
};

template <class Node>
union ContainerHook {
  RbLinks<Node> rb;
  ListLinks<Node> list;
  PairingLinks<Node> pairing;
  std::size_t heap_index;
};

static_assert(sizeof(ContainerHook<int>) == 3 * sizeof(void*));

}  // namespace runsel
