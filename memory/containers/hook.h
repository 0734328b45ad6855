// The container hook every run header carries. It is one fixed-size union for
// every container, so that the run layout (and therefore every address the
// allocator hands out) is the same whichever container is built in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "structures/intrusive_list.h"
#include "structures/pairing_links.h"
#include "structures/tree_links.h"

// Where a run's hook lives, a build option (-Dhook_placement, meson sets
// this): 0, in the run header (run_header); 1, in the page map entry of the
// run's first page (page_map), as mozjemalloc kept its tree nodes. The run
// header keeps its hook field either way, so that runs and addresses are laid
// out alike; only the traits (arena/run.h) say which one the containers use.
#ifndef RUNSEL_HOOKS_IN_PAGE_MAP
#define RUNSEL_HOOKS_IN_PAGE_MAP 0
#endif

namespace runsel {

// A list in one of several buckets (fullest_first's occupancy buckets).
template <class Node>
struct BucketLinks {
  ListLinks<Node> list;
  std::size_t bucket;  // the bucket whose list holds the node
};

// Three words, whichever container is built in. A container that needs a key
// beyond its links reads it from the node through its traits (see
// container.h): the free count (in the run header) or the serial number the
// arena gives each run when it creates it (in the page map: see
// arena/run.h). Every variant keeps them alike.
template <class Node>
union ContainerHook {
  TreeLinks<Node> tree;  // rb_first, rb_root, sorted_by_free, wavl
  LlrbLinks<Node> llrb;  // moz_tree (two words, as mozjemalloc's nodes)
  ListLinks<Node> list;
  BucketLinks<Node> buckets;
  PairingLinks<Node> pairing;  // pairing_heap, pairing_heap_lazy, age_address, je_slabs
  std::size_t heap_index;
};

static_assert(sizeof(ContainerHook<int>) == 3 * sizeof(void*));

}  // namespace runsel
