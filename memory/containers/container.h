// The seam between a bin and its set of non-full runs: the concept every
// container satisfies. Only the bin calls these, and only through the
// container type chosen in containers/selected.h.
#pragma once

#include <concepts>
#include <cstddef>

namespace runsel {

// HookOf maps a node to its ContainerHook<Node>:
//   static ContainerHook<Node>& hook(Node*)
template <class H, class Node>
concept HookAccess = requires(Node* node) {
  {H::hook(node)};
};

// insert(run): run became non-full (new, or full with one region freed).
// erase(run): a run in the set filled up or became empty.
// peek(): the run the next allocation uses; it stays in the set; null if empty.
// touched(run): an allocation or free changed a member's occupancy.
// check(): walks the structure and verifies every invariant (returns false
//          and sets *why on the first violation). size(): members.
template <class C, class Node>
concept NonFullRunSet = requires(C set, const C const_set, Node* node, const char** why) {
  set.insert(node);
  set.erase(node);
  { set.peek() } -> std::same_as<Node*>;
  set.touched(node);
  { const_set.check(why) } -> std::same_as<bool>;
  { const_set.size() } -> std::convertible_to<std::size_t>;
  { C::kName } -> std::convertible_to<const char*>;
};

}  // namespace runsel
