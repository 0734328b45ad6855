// The one place the build-time container choice becomes a type. meson passes
// -DRUNSEL_CONTAINER=<name>; everything else uses NonFullRuns.
#pragma once

#include <type_traits>

#include "containers/container.h"
#include "containers/rb_first.h"

namespace runsel {

enum class ContainerKind { rb_first };

#ifndef RUNSEL_CONTAINER
#error "RUNSEL_CONTAINER must name the run container (meson sets it)"
#endif
inline constexpr ContainerKind kContainer = ContainerKind::RUNSEL_CONTAINER;

template <ContainerKind kind, class Node, class HookOf>
struct ContainerFor;
template <class Node, class HookOf>
struct ContainerFor<ContainerKind::rb_first, Node, HookOf> {
  using type = RbFirstRuns<Node, HookOf>;
};

template <class Node, class HookOf>
using SelectedContainer = typename ContainerFor<kContainer, Node, HookOf>::type;

}  // namespace runsel
