// Non-full run container "je_slabs" (jemalloc 5.3's bin: src/arena.c
// arena_bin_lower_slab and arena_bin_malloc_no_fresh_slab, src/bin.c,
// include/jemalloc/internal/ph.h): the current slab (`slabcur`) outside a
// pairing heap of the other non-full slabs (`slabs_nonfull`), ordered by
// (serial number, address), whose inserts wait on an auxiliary list.
//
// Policy, jemalloc's rules:
// - pick(): the current run; with none, the heap's first run is removed from
//   the heap and becomes current (jemalloc's remove_first).
// - insert(run), a full run with one region freed (or a new run): if there
//   is a current run and it compares higher, the run replaces it and the old
//   current run goes into the heap; otherwise, including when there is no
//   current run, the run goes into the heap.
// - erase(run): the current run filled or emptied, and there is none; any
//   other run leaves the heap.
// So the current run, when there is one, is below every run of the heap, and
// the pick is always the oldest (then lowest) non-full run: exactly
// age_address's choices, which the same_choices and trace tests check (both
// pick `oldest_lowest`). How faithful: the rules, the key and the heap are
// jemalloc's (structures/pairing_heap.h's LazyPairingHeap: an insert below
// the root becomes the root, others go to the root's aux list, melded a
// little at each insert as ph.h's binary counter does, and the list is
// paired up when the root leaves). Where runsel's seam differs the choices
// do not: jemalloc keeps a full slabcur until the next allocation (runsel's
// bin erases it when it fills), and makes a fresh slab slabcur directly
// (here it passes through the heap, which it then leaves at once).
// Complexity: pick O(1) with a current run, else the heap's removal of its
// root (amortised O(log n)); insert O(1) (amortised, the aux list's melds);
// erase O(1) for the current run, else the heap's erase; touched O(1), a
// no-op; check O(n). Memory: the three words of the 24-byte ContainerHook
// (leftmost child, next sibling or aux tree, previous sibling or parent) and
// the serial number the arena keeps in the page map (see age_address.h);
// four words per bin (root, size, inserts since the aux list was empty,
// current run).
#pragma once

#include <cstddef>

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/pairing_heap.h"

namespace runsel {

template <SerialAccess Traits>
class JeSlabsRuns {
 public:
  using Node = typename Traits::Node;

  Node* pick() {
    if (current_ == nullptr) current_ = take_first(heap_);
    return current_;
  }

  void insert(Node* run) {
    if (current_ != nullptr && age_less<Traits>(run, current_)) {
      heap_.insert(current_);
      current_ = run;
    } else {
      heap_.insert(run);
    }
  }

  void erase(Node* run) {
    if (run == current_) {
      current_ = nullptr;
    } else {
      heap_.erase(run);
    }
  }

  void touched(Node*) {}
  std::size_t size() const { return heap_.size() + (current_ != nullptr); }

  Node* current() const { return current_; }          // for tests
  Node* heap_first() const { return heap_.first(); }  // for tests: the heap's root

  // The heap's rules (pairing_heap.h), and the current run is below the
  // heap's minimum (so it is not in the heap, and it is the oldest run).
  bool check(const char** why) const {
    if (!heap_.check(why)) return false;
    Node* lowest = heap_.first();
    const bool below =
        current_ == nullptr || lowest == nullptr || age_less<Traits>(current_, lowest);
    return below || check_failed(why, "the current run is not below the heap's minimum");
  }

 private:
  LazyPairingHeap<Node, RunAgeHeapOrder<Traits>> heap_;
  Node* current_ = nullptr;
};

}  // namespace runsel
