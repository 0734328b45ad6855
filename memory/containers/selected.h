// The one place the build-time container choice becomes a type. meson passes
// -DRUNSEL_CONTAINER=<name>, a name from the `containers` list in meson.build;
// everything else uses NonFullRuns (arena/arena.h).
#pragma once

#include "containers/list.h"

namespace runsel {

#ifndef RUNSEL_CONTAINER
#error "RUNSEL_CONTAINER must name the run container (meson sets it)"
#endif
using SelectedEntry = container_entries::RUNSEL_CONTAINER;
inline constexpr const char* kContainerName = SelectedEntry::kName;

// Every container takes one parameter, its traits (container.h).
template <class Traits>
using SelectedRuns = typename SelectedEntry::template Type<Traits>;

// The profiling twins of the libraries (meson's profile-malloc-<container>,
// -DRUNSEL_PROFILE_CONTAINERS=1) call the container out of line, so that callgrind
// counts its own instructions: the inclusive cost of these four members. The
// ordinary libraries inline the container as before.
template <class Container, class Node>
struct OutOfLineRuns : Container {
  using Container::Container;
  [[gnu::noinline]] void insert(Node* node) { Container::insert(node); }
  [[gnu::noinline]] void erase(Node* node) { Container::erase(node); }
  [[gnu::noinline]] Node* pick() { return Container::pick(); }
  [[gnu::noinline]] void touched(Node* node) { Container::touched(node); }
};

#if defined(RUNSEL_PROFILE_CONTAINERS)
template <class Traits>
using SelectedContainer = OutOfLineRuns<SelectedRuns<Traits>, typename Traits::Node>;
#else
template <class Traits>
using SelectedContainer = SelectedRuns<Traits>;
#endif

}  // namespace runsel
