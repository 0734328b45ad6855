// The seam between a bin and its set of non-full runs: the concept every
// container satisfies. Only the bin calls these, and only through the
// container type chosen in containers/selected.h.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "containers/hook.h"
#include "structures/check_failed.h"

namespace runsel {

// Every container is a class template over one parameter, its traits: what
// it holds and where things are. A traits type T gives
//   using Node = ...;                         the node (a run header).
//   static ContainerHook<Node>& hook(Node*)   where the node's links live:
//                                             the run header, or the page map
//                                             entry of the run's first page
//                                             (arena/run.h: one traits choice).
//   static bool linked(const Node* member, const Node* neighbour)
// For the containers that need them, it also gives the keys (OccupancyAccess,
// SerialAccess) and side memory (SideMemory) below.
//
// linked() is true when `neighbour` is null or a node of the same set (for
// runs: a run of the same bin), judged without dereferencing `neighbour`
// until it is known to be one. Every container calls it on the paths that
// write through links (insert, erase, rebalancing, fullest_first's moves)
// before it follows a link, and checks the back links it relies on; either
// failing is fatal (platform/fatal.h), naming the run. Run headers are
// within reach of a program's stray writes; the containers' own fields are
// not, and are trusted.
template <class T>
concept ContainerTraits = requires(typename T::Node* node, const typename T::Node* member,
                                   const typename T::Node* neighbour) {
  { T::hook(node) } -> std::same_as<ContainerHook<typename T::Node>&>;
  { T::linked(member, neighbour) } -> std::same_as<bool>;
};

// The keys of the containers ordered by occupancy (fullest_first,
// sorted_by_free, moz_tree's full current run): a run's free regions and its
// regions in all.
template <class T>
concept OccupancyAccess = ContainerTraits<T> && requires(const typename T::Node* node) {
  { T::free_regions(node) } -> std::same_as<std::uint32_t>;
  { T::regions(node) } -> std::same_as<std::uint32_t>;
};

// The key of the containers ordered by age (age_address, je_slabs): the
// serial number the arena gave the run when it created it; it never changes
// while the run lives.
template <class T>
concept SerialAccess = ContainerTraits<T> && requires(const typename T::Node* node) {
  { T::serial(node) } -> std::same_as<std::uint64_t>;
};

// Memory beyond the hooks (array_heap's side array): raw memory from the
// allocator's metadata, never from the heap the container describes;
// allocate() returns null when there is none, release() takes the same size.
template <class T>
concept SideMemory = ContainerTraits<T> && requires(void* p, std::size_t bytes) {
  { T::allocate(bytes) } -> std::same_as<void*>;
  T::release(p, bytes);
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

// The generated containers/list.h describes each container with an entry
// type (Type<Traits>, kName, kPicks) and lists them all in a ContainerList.
template <class... Entries>
struct ContainerList {
  static constexpr std::size_t kSize = sizeof...(Entries);
};

}  // namespace runsel
