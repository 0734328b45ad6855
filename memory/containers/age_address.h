// Non-full run container "age_address" (jemalloc since 4.4 orders a bin's
// non-full slabs by age, then address): the pairing heap of runs keyed by
// (serial number, address); the next allocation uses the oldest run.
//
// Policy: the run the arena created first, among equals the lowest address.
// Filling the old runs first lets the young ones, which a burst created and
// which hold the burst's short-lived regions, drain and go back; the address
// keeps the choice deterministic. The serial number is given by the arena
// when it creates a run (a 64-bit counter per bin, so it never wraps); an
// empty run the bin kept and uses again keeps the number it was created with.
// Complexity: as pairing_heap (the same heap, another key): insert O(1);
// pick O(1); erase of the root amortised O(log n); erase of another member
// O(1) plus the pairing of its children; touched O(1), a no-op; check O(n).
// Memory: the three words of the 24-byte ContainerHook (leftmost child, next
// sibling, previous sibling or parent), nothing more per run; three words per
// bin (root, size, the held lowest run: first_of.h). The run header has no
// room for the serial number, and growing it for one container would change
// the layout (and the addresses) of every variant, so the arena keeps it in
// the page map entry of the run's first page, idle while the run is allocated
// (see arena/run.h). Each
// comparison reads it there: a second cache line per run, in the chunk
// header, shared by the runs of a chunk (252 usable pages at most).
#pragma once

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/pairing_heap.h"

namespace runsel {

template <SerialAccess Traits>
using AgeAddressRuns = FirstOfRuns<Traits, PairingHeap, RunAgeHeapOrder<Traits>>;

}  // namespace runsel
