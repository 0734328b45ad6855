// Non-full run container "pairing_heap_lazy" (jemalloc's pairing heap with an
// auxiliary list): the pairing heap of runs by address, with inserts
// appended to a list beside the root instead of melded into it.
//
// Policy: the lowest-addressed run, exactly as rb_first and pairing_heap (so
// all make the same choices). The eager pairing_heap makes every inserted run
// a child of the root, so the removal of the root pairs up every run inserted
// since the last removal, one cache miss per run header: that removal cost
// 4.2x rb_first's at 1,024 runs. Here an insert above the root goes to the
// front of an aux list. Each insert melds a little of the front of the list
// (a binary counter: about one meld per insert, always on run headers just
// touched). The list, about log2 k trees after k inserts, is paired up only
// when the root leaves. A run below the root becomes the root at once,
// so the root is always the minimum and pick() needs no work. Measured
// (experiments/bench/containers.md): removing the minimum costs 1.3-1.5x
// rb_first's at 64 runs but 2.5-3x at 1,024 and 16,384 (a chain of about
// log2 n dependent header loads, one per child of the root); an insert is
// about 4x cheaper than rb_first's at 64 runs and 6-17x at 1,024 and 16,384.
// Complexity:
// - insert amortised O(1); pick O(1).
// - erase of the root amortised O(log n): its children and the aux list, each
//   paired iteratively.
// - erase of another member O(1) to unlink, plus the pairing of its own
//   children, which join the aux list.
// - touched O(1), a no-op; check O(n) without recursion or allocation.
// Memory: the three words of the 24-byte ContainerHook (leftmost child, next
// sibling or aux tree, previous sibling or parent); four words per bin (root,
// size, inserts since the aux list was last empty, the held lowest run:
// first_of.h). The heap is structures/pairing_heap.h.
#pragma once

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/pairing_heap.h"

namespace runsel {

template <ContainerTraits Traits>
using PairingHeapLazyRuns = FirstOfRuns<Traits, LazyPairingHeap, RunAddressHeapOrder<Traits>>;

}  // namespace runsel
