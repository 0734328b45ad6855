// The one order every address-ordered container uses: a run's address.
#pragma once

#include <cstdint>

#include "structures/pairing_links.h"
#include "structures/rb_links.h"
#include "structures/wavl_links.h"

namespace runsel {

inline bool address_less(const void* a, const void* b) {
  return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
}

// Address order of runs in an RbTree over the hook's rb links (rb_first, rb_root).
template <class Node, class HookOf>
struct RunAddressOrder {
  static RbLinks<Node>& links(Node* run) { return HookOf::hook(run).rb; }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }
};

// The same order in a pairing heap over the hook's pairing links
// (pairing_heap, pairing_heap_lazy).
template <class Node, class HookOf>
struct RunAddressHeapOrder {
  static PairingLinks<Node>& links(Node* run) { return HookOf::hook(run).pairing; }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }
};

// The same order in a WavlTree over the hook's wavl links (wavl).
template <class Node, class HookOf>
struct RunAddressWavlOrder {
  static WavlLinks<Node>& links(Node* run) { return HookOf::hook(run).wavl; }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }
};

}  // namespace runsel
