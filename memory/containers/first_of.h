// A container whose pick is the first member of an ordered structure (a tree
// or a heap with insert, erase, first, size and check) and whose touched is a
// no-op: rb_first, wavl, pairing_heap, pairing_heap_lazy and age_address
// differ only in the structure and its order (each is FirstOfRuns of its own).
//
// The held lowest run: the lowest member may be kept outside the structure,
// in held_, and the structure holds the others. A bin fills and empties its
// lowest run far more often than any other, so most inserts and erases are
// of that run, and neither touches the structure:
// - erase(held_) only forgets it. The structure's first becomes the held run
//   at the next pick(), not before (held_ is null until then).
// - insert(run) below everything the structure holds becomes held_ at once
//   (the old held run, if any, goes into the structure).
// - pick() of an empty held_ takes the structure's first out.
// So a run that fills and regains a region, again and again, as a steady
// small-block loop's lowest run does, never reaches the structure. The picks
// are exactly those of the structure alone: held_, when set, is below all its
// members. The structure's insert and erase stay out of line, so the held
// run's paths inline into the bin as a few loads and a compare.
//
// What the link checks cover: the structure's members are checked as before
// on every step through their links. The held run's own links are never
// followed while it is held (nothing links to it), and are written afresh
// when it enters the structure; so damage to them is harmless and is not
// reported.
#pragma once

#include <cstddef>

#include "structures/check_failed.h"

namespace runsel {

template <class Node, class Structure, class Order>
class FirstOf {
 public:
  void insert(Node* run) {
    if (held_ != nullptr) {
      if (!Order::less(run, held_)) return spill(run);
      spill(held_);
    } else if (structure_.size() != 0 && !Order::less(run, structure_.first())) {
      return spill(run);
    }
    held_ = run;
  }
  void erase(Node* run) {
    if (run == held_) {
      held_ = nullptr;
    } else {
      remove(run);
    }
  }
  Node* pick() {
    if (held_ == nullptr && structure_.size() != 0) held_ = refill();
    return held_;
  }
  void touched(Node*) {}
  std::size_t size() const { return structure_.size() + (held_ != nullptr ? 1 : 0); }
  // The structure verifies its own order and links; the held run, when there
  // is one, must be below all of its members.
  bool check(const char** why) const {
    if (!structure_.check(why)) return false;
    if (held_ == nullptr) return true;
    Node* first = structure_.first();
    if (first == held_) return check_failed(why, "the held run is also in the structure");
    if (first != nullptr && !Order::less(held_, first)) {
      return check_failed(why, "the held run is not below the structure's first member");
    }
    return true;
  }
  // For tests: a tree's root, and the structure's own first member.
  Node* root() const requires requires(const Structure& structure) { structure.root(); }
  { return structure_.root(); }
  Node* structure_first() const { return structure_.first(); }

 private:
  [[gnu::noinline]] void spill(Node* run) { structure_.insert(run); }
  [[gnu::noinline]] void remove(Node* run) { structure_.erase(run); }
  [[gnu::noinline]] Node* refill() {
    Node* first = structure_.first();
    structure_.erase(first);
    return first;
  }

  Node* held_ = nullptr;
  Structure structure_;
};

// Takes the first member out of an ordered structure (null when it is
// empty): moz_tree and je_slabs make it their current run.
template <class Structure>
auto take_first(Structure& structure) {
  auto* first = structure.first();
  if (first != nullptr) structure.erase(first);
  return first;
}

// The container over `Traits`' runs kept in Structure<Node, Order>.
template <class Traits, template <class, class> class Structure, class Order>
using FirstOfRuns = FirstOf<typename Traits::Node, Structure<typename Traits::Node, Order>, Order>;

}  // namespace runsel
