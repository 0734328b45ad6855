// The one order every address-ordered container uses: a run's address.
#pragma once

#include <cstdint>

#include "structures/pairing_links.h"
#include "structures/tree_links.h"

namespace runsel {

inline bool address_less(const void* a, const void* b) {
  return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
}

// Address order of runs in a tree over the hook's tree links (rb_first, rb_root,
// wavl).
template <class Node, class HookOf>
struct RunAddressOrder {
  static TreeLinks<Node>& links(Node* run) { return HookOf::hook(run).tree; }
  static bool linked(const Node* run, const Node* neighbour) {
    return HookOf::linked(run, neighbour);
  }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }
};

// The same order in a pairing heap over the hook's pairing links
// (pairing_heap, pairing_heap_lazy).
template <class Node, class HookOf>
struct RunAddressHeapOrder {
  static PairingLinks<Node>& links(Node* run) { return HookOf::hook(run).pairing; }
  static bool linked(const Node* run, const Node* neighbour) {
    return HookOf::linked(run, neighbour);
  }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }
};

}  // namespace runsel
