// Non-full run container "rb_first" (the idealized lowest-address policy): a
// red-black tree of runs ordered by address; the next allocation uses the
// lowest run. It is what mozjemalloc's comment says its tree did, not what
// mozjemalloc did: moz_tree reproduces that (a current run outside the tree,
// which departs from the lowest run after the current run empties, and a
// left-leaning tree without parent pointers). rb_first reproduces no
// allocator; it is the policy in its purest, cheapest-to-pick form.
//
// Policy: always allocate from the lowest-addressed non-full run. Filling low
// runs first packs live regions towards the bottom of the heap so high runs
// drain and can be returned; the cost is a tree walk on every insert/erase
// of a run other than the lowest.
// Complexity: insert O(log n), O(1) for a new lowest run; erase O(log n),
// O(1) for the lowest run (held outside the tree, first_of.h); pick O(1), or
// the tree's erase of its cached minimum after the held run left; touched
// O(1), a no-op;
// check O(n). Memory: the three words of the 24-byte ContainerHook every run
// header carries anyway (left, right, parent+colour), nothing more per run;
// four words per bin (root, cached first, size, and the
// lowest run held outside the tree: first_of.h).
#pragma once

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/rb_tree.h"

namespace runsel {

template <ContainerTraits Traits>
using RbFirstRuns = FirstOfRuns<Traits, RbTree, RunAddressOrder<Traits>>;

}  // namespace runsel
