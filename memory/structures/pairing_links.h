// Intrusive pairing heap links, embedded in any node type that a PairingHeap
// or LazyPairingHeap orders. Kept apart from pairing_heap.h so node headers
// stay light.
#pragma once

namespace runsel {

template <class Node>
struct PairingLinks {
  Node* child;  // leftmost child
  Node* next;   // next sibling (for a heap's root: the next tree of its aux list)
  Node* prev;   // previous sibling, or the parent for a leftmost child (an
                // aux tree: the previous aux tree, or the heap's root)
};

}  // namespace runsel
