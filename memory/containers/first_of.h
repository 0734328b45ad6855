// A container whose pick is the first member of an ordered structure (a tree
// or a heap with insert, erase, first, size and check) and whose touched is a
// no-op: rb_first, wavl, pairing_heap, pairing_heap_lazy and age_address
// differ only in the structure and its order (each is FirstOfRuns of its own).
#pragma once

#include <cstddef>

namespace runsel {

template <class Node, class Structure>
class FirstOf {
 public:
  void insert(Node* run) { structure_.insert(run); }
  void erase(Node* run) { structure_.erase(run); }
  Node* pick() const { return structure_.first(); }
  void touched(Node*) {}
  std::size_t size() const { return structure_.size(); }
  // The structure verifies its own order and links, which make first() the
  // lowest member in that order.
  bool check(const char** why) const { return structure_.check(why); }
  // For tests: a tree's root.
  Node* root() const
    requires requires(const Structure& structure) { structure.root(); }
  {
    return structure_.root();
  }

 protected:
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
using FirstOfRuns = FirstOf<typename Traits::Node, Structure<typename Traits::Node, Order>>;

}  // namespace runsel
