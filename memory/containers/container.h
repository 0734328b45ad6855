// The seam between a bin and its set of non-full runs: the concept every
// container satisfies. Only the bin calls these, and only through the
// container type chosen in containers/selected.h.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace runsel {

// Every container is a class template <class Node, class HookOf, class
// Metadata>: the node (a run header), how to reach its hook, and where any
// memory beyond the hook comes from (array_heap's side array; the others
// ignore it).
//
// HookOf maps a node to its ContainerHook<Node>, and says whether a link
// read from a member's hook may be followed:
//   static ContainerHook<Node>& hook(Node*)
//   static bool linked(const Node* member, const Node* neighbour)
// linked() is true when `neighbour` is null or a node of the same set (for
// runs: a run of the same bin), judged without dereferencing `neighbour`
// until it is known to be one. Every container calls it on the paths that
// write through links (insert, erase, rebalancing, fullest_first's moves)
// before it follows a link, and checks the back links it relies on; either
// failing is fatal (platform/fatal.h), naming the run. Run headers are
// within reach of a program's stray writes; the containers' own fields are
// not, and are trusted.
template <class H, class Node>
concept HookAccess = requires(Node* node, const Node* member, const Node* neighbour) {
  {H::hook(node)};
  { H::linked(member, neighbour) } -> std::same_as<bool>;
};

// What the containers keyed by occupancy also read through HookOf: a run's
// free regions and its regions in all (fullest_first, sorted_by_free).
template <class H, class Node>
concept OccupancyAccess = HookAccess<H, Node> && requires(const Node* node) {
  { H::free_regions(node) } -> std::convertible_to<std::uint32_t>;
  { H::regions(node) } -> std::convertible_to<std::uint32_t>;
};

// What a container keyed by age reads: the serial number the arena gave the
// run when it created it (age_address); it never changes while the run lives.
template <class H, class Node>
concept SerialAccess = HookAccess<H, Node> && requires(const Node* node) {
  { H::serial(node) } -> std::convertible_to<std::uint64_t>;
};

// insert(run): run became non-full (new, or full with one region freed).
// erase(run): a run in the set filled up or became empty.
// pick(): the run the next allocation uses; it stays in the set; null if
//         empty. Not const: a container may record its choice (rb_root).
// touched(run): an allocation or free changed a member's occupancy.
// check(): walks the structure and verifies every invariant (returns false
//          and sets *why, when why is not null, on the first violation).
// size(): members.
// A container's name is not part of it: it is its entry in meson.build's
// `containers` list (containers/list.h, generated).
template <class C, class Node>
concept NonFullRunSet = requires(C set, const C const_set, Node* node, const char** why) {
  set.insert(node);
  set.erase(node);
  { set.pick() } -> std::same_as<Node*>;
  set.touched(node);
  { const_set.check(why) } -> std::same_as<bool>;
  { const_set.size() } -> std::convertible_to<std::size_t>;
};

// How check() reports the first violation it finds: `return check_failed(why,
// "what is wrong");`. `why` may be null.
inline bool check_failed(const char** why, const char* reason) {
  if (why != nullptr) *why = reason;
  return false;
}

// The generated containers/list.h describes each container with an entry
// type (Type<Node, HookOf, Metadata>, kName, kPicks) and lists them all in a
// ContainerList.
template <class... Entries>
struct ContainerList {
  static constexpr std::size_t kSize = sizeof...(Entries);
};

}  // namespace runsel
