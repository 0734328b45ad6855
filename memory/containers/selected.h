// The one place the build-time container choice becomes a type. meson passes
// -DRUNSEL_CONTAINER=<name>; everything else uses NonFullRuns.
#pragma once

#include <type_traits>

#include "containers/array_heap.h"
#include "containers/container.h"
#include "containers/lifo.h"
#include "containers/pairing_heap.h"
#include "containers/rb_first.h"
#include "containers/rb_root.h"

namespace runsel {

// One enumerator per entry of meson.build's `containers` list.
enum class ContainerKind { rb_first, rb_root, lifo, array_heap, pairing_heap };

#ifndef RUNSEL_CONTAINER
#error "RUNSEL_CONTAINER must name the run container (meson sets it)"
#endif
inline constexpr ContainerKind kContainer = ContainerKind::RUNSEL_CONTAINER;

// Every container takes the same parameters: the node, how to reach its hook,
// and the metadata allocator (used only by array_heap's side array).
template <ContainerKind kind, class Node, class HookOf, class Metadata>
struct ContainerFor;
template <class Node, class HookOf, class Metadata>
struct ContainerFor<ContainerKind::rb_first, Node, HookOf, Metadata> {
  using type = RbFirstRuns<Node, HookOf, Metadata>;
};
template <class Node, class HookOf, class Metadata>
struct ContainerFor<ContainerKind::rb_root, Node, HookOf, Metadata> {
  using type = RbRootRuns<Node, HookOf, Metadata>;
};
template <class Node, class HookOf, class Metadata>
struct ContainerFor<ContainerKind::lifo, Node, HookOf, Metadata> {
  using type = LifoRuns<Node, HookOf, Metadata>;
};
template <class Node, class HookOf, class Metadata>
struct ContainerFor<ContainerKind::array_heap, Node, HookOf, Metadata> {
  using type = ArrayHeapRuns<Node, HookOf, Metadata>;
};
template <class Node, class HookOf, class Metadata>
struct ContainerFor<ContainerKind::pairing_heap, Node, HookOf, Metadata> {
  using type = PairingHeapRuns<Node, HookOf, Metadata>;
};

// The profiling twins of the libraries (meson's profile-malloc-<container>,
// -DRUNSEL_PROFILE_CONTAINERS=1) call the container out of line, so that callgrind
// counts its own instructions: the inclusive cost of these four members. The
// ordinary libraries inline the container as before.
template <class Container, class Node>
struct OutOfLineRuns : Container {
  using Container::Container;
  [[gnu::noinline]] void insert(Node* node) { Container::insert(node); }
  [[gnu::noinline]] void erase(Node* node) { Container::erase(node); }
  [[gnu::noinline]] Node* peek() { return Container::peek(); }
  [[gnu::noinline]] void touched(Node* node) { Container::touched(node); }
};

#if defined(RUNSEL_PROFILE_CONTAINERS)
template <class Node, class HookOf, class Metadata>
using SelectedContainer =
    OutOfLineRuns<typename ContainerFor<kContainer, Node, HookOf, Metadata>::type, Node>;
#else
template <class Node, class HookOf, class Metadata>
using SelectedContainer = typename ContainerFor<kContainer, Node, HookOf, Metadata>::type;
#endif

}  // namespace runsel
