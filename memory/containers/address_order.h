// The orders the containers' shared structures use over runs, as the Reps
// those structures take (structures/binary_tree.h, pairing_heap.h): where
// the links are (through the traits' hook), whether a link may be followed
// (the traits' linked()), and the key.
#pragma once

#include <cstdint>

#include "containers/container.h"
#include "structures/pairing_links.h"
#include "structures/tree_links.h"

namespace runsel {

inline bool address_less(const void* a, const void* b) {
  return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
}

// A key, then the address: the orders of the containers keyed by occupancy
// or by age.
template <class Key>
inline bool key_then_address(Key key_a, Key key_b, const void* a, const void* b) {
  return key_a != key_b ? key_a < key_b : address_less(a, b);
}

// (serial number, address): the order the arena created the runs in
// (age_address, je_slabs).
template <SerialAccess Traits>
inline bool age_less(const typename Traits::Node* a, const typename Traits::Node* b) {
  return key_then_address(Traits::serial(a), Traits::serial(b), a, b);
}

// A Rep over the hook's member `Member` (its tree or its pairing links),
// ordered by `Less`.
template <class Traits, auto Member, auto Less>
struct RunOrder {
  using Node = typename Traits::Node;
  static auto& links(Node* run) { return Traits::hook(run).*Member; }
  static bool linked(const Node* run, const Node* neighbour) {
    return Traits::linked(run, neighbour);
  }
  static bool less(const Node* a, const Node* b) { return Less(a, b); }
};

// Address order in a tree (rb_first, rb_root, wavl), in a left-leaning tree
// (moz_tree) and in a pairing heap (pairing_heap, pairing_heap_lazy); age
// order in a pairing heap (age_address, je_slabs).
template <class Traits, auto Member>
using ByAddress = RunOrder<Traits, Member, &address_less>;
template <class Traits>
using RunAddressOrder = ByAddress<Traits, &ContainerHook<typename Traits::Node>::tree>;
template <class Traits>
using RunAddressLlrbOrder = ByAddress<Traits, &ContainerHook<typename Traits::Node>::llrb>;
template <class Traits>
using RunAddressHeapOrder = ByAddress<Traits, &ContainerHook<typename Traits::Node>::pairing>;
template <class Traits>
using RunAgeHeapOrder =
    RunOrder<Traits, &ContainerHook<typename Traits::Node>::pairing, &age_less<Traits>>;

}  // namespace runsel
