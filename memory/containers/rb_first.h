// Non-full run container "rb_first" (mozjemalloc until ~2024): a red-black
// tree of runs ordered by address; the next allocation uses the lowest run.
//
// Policy: always allocate from the lowest-addressed non-full run. Filling low
// runs first packs live regions towards the bottom of the heap so high runs
// drain and can be returned; the cost is a tree walk on every insert/erase.
// Complexity: insert O(log n); erase O(log n) (plus one successor step when
// the lowest run leaves); peek O(1) (cached minimum); touched O(1), a no-op;
// check O(n). Memory: the three words of the 24-byte ContainerHook every run
// header carries anyway (left, right, parent+colour), nothing more per run;
// three words per bin (root, cached first, size).
#pragma once

#include <cstddef>
#include <cstdint>

#include "containers/container.h"
#include "containers/hook.h"
#include "structures/rb_links.h"
#include "structures/rb_tree.h"

namespace runsel {

// Metadata is unused: the tree needs no memory beyond the hook. It is a
// parameter so that every container has the same template signature.
// Address order of runs in an RbTree over the hook's rb links; shared by the
// red-black containers (rb_first, rb_root).
template <class Node, class HookOf>
struct RunAddressOrder {
  static RbLinks<Node>& links(Node* run) { return HookOf::hook(run).rb; }
  static bool less(const Node* a, const Node* b) { return address(a) < address(b); }
  static std::uintptr_t address(const Node* run) { return reinterpret_cast<std::uintptr_t>(run); }
};

template <class Node, class HookOf, class Metadata>
requires HookAccess<HookOf, Node>
class RbFirstRuns {
 public:
  static constexpr const char* kName = "rb_first";

  void insert(Node* run) { tree_.insert(run); }
  void erase(Node* run) { tree_.erase(run); }
  Node* peek() const { return tree_.first(); }
  void touched(Node*) {}
  std::size_t size() const { return tree_.size(); }
  // The tree's root; rb_root builds its policy on the same tree.
  Node* root() const { return tree_.root(); }

  bool check(const char** why) const {
    if (!tree_.check(why)) return false;
    // The tree has verified that its in-order sequence rises strictly by
    // address, so the leftmost node is the lowest run: peek() must be it.
    Node* lowest = tree_.root();
    while (lowest != nullptr && ByAddress::links(lowest).left != nullptr) {
      lowest = ByAddress::links(lowest).left;
    }
    if (peek() != lowest) {
      if (why != nullptr) *why = "peek() is not the lowest-addressed run";
      return false;
    }
    return true;
  }

 private:
  using ByAddress = RunAddressOrder<Node, HookOf>;

  RbTree<Node, ByAddress> tree_;
};

}  // namespace runsel
