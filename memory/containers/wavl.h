// Non-full run container "wavl" (snmalloc's maintainers compared a weak-AVL
// tree with their red-black tree): a WAVL tree of runs ordered by address;
// the next allocation uses the lowest run.
//
// Policy: the lowest-addressed run, exactly as rb_first (so both make the
// same choices); only the balancing differs. A WAVL tree keeps one rank
// parity bit per node where a red-black tree keeps a colour. It rotates at
// most twice per insert or erase (a red-black erase may rotate three times),
// and most of its repairs only flip bits. Built by inserts alone it is an AVL
// tree, lower than a red-black tree of the same size.
// Complexity:
// - insert O(log n), O(1) for a new lowest run.
// - erase O(log n), O(1) for the lowest run (held outside the tree,
//   first_of.h).
// - pick O(1), or the tree's erase of its cached minimum after the held run
//   left.
// - touched O(1), a no-op; check O(n) (the rank rule, the order, the links).
// Memory: the three words of the 24-byte ContainerHook (left, right,
// parent+rank parity), nothing more per run; four words per bin (root, cached
// first, size, the held lowest run: first_of.h).
#pragma once

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/tree_links.h"
#include "structures/wavl_tree.h"

namespace runsel {

template <ContainerTraits Traits>
using WavlRuns = FirstOfRuns<Traits, WavlTree, RunAddressOrder<Traits>>;

}  // namespace runsel
