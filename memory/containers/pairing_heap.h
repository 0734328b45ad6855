// Non-full run container "pairing_heap" (jemalloc's run and extent heaps): an
// intrusive pairing heap of runs ordered by address, the root always the
// lowest run.
//
// Policy: the next allocation uses the lowest-addressed run, exactly as
// rb_first does (so both make the same choices). A pairing heap does no
// rebalancing: insert is one comparison and a link, and the work of ordering
// is deferred to the removal of the minimum, which pairs up the root's
// children (jemalloc measured about 7x fewer cycles than its red-black tree on
// insert/delete/first). Melding is eager, so the root is the minimum after
// every call and pick() needs no work.
// Complexity:
// - insert O(1); pick O(1).
// - erase of the root amortised O(log n): two-pass pairing over its children,
//   done iteratively (no recursion, so no stack depth proportional to the
//   heap).
// - erase of another member O(1) to unlink, plus the pairing of its own
//   children.
// - touched O(1), a no-op; check O(n) without recursion or allocation.
// Memory: the three words of the 24-byte ContainerHook (leftmost child, next
// sibling, previous sibling or parent); three words per bin (root, size, the
// lowest run held outside the heap: first_of.h). The heap itself is
// structures/pairing_heap.h, shared with age_address and pairing_heap_lazy.
#pragma once

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/pairing_heap.h"

namespace runsel {

template <ContainerTraits Traits>
using PairingHeapRuns = FirstOfRuns<Traits, PairingHeap, RunAddressHeapOrder<Traits>>;

}  // namespace runsel
