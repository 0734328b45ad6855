// Non-full run container "moz_tree" (mozjemalloc until 2024, Firefox 115 ESR:
// arena_t::MallocSmall, arena_t::DallocSmall, GetNonFullBinRun and
// RedBlackTree.h): a current run outside a tree of the other non-full runs,
// ordered by address, with mozjemalloc's rules for moving runs between them.
//
// Policy, exactly the allocator's:
// - pick(): the current run, unless there is none or it is full; then the
//   tree's first (lowest) run leaves the tree and becomes current. A full
//   current run is simply dropped (full runs are in no structure). An empty
//   tree: no pick, and the new run the bin makes becomes current (insert).
// - erase(run), a run that emptied: if it is current there is no current run
//   any more; otherwise it leaves the tree. A run that filled: if it is
//   current it stays current, full, until the next pick() drops it (it is
//   no longer a member; what a free into it, or into another full run,
//   meets until then is mozjemalloc's full current run).
// - insert(run), a full run with one region freed (or a new run): the full
//   current run itself stays current. With no current run, the run becomes
//   current whatever its address, even with lower runs in the tree. Below
//   the current run's address, it becomes current and the old current run
//   goes into the tree (unless full: then it is dropped). Otherwise it goes
//   into the tree.
// So the pick is the lowest non-full run only while there is a current run:
// after the current run empties, the next full run to regain a region is
// used before lower runs in the tree. That is where rb_first (always the
// lowest) departs from the allocator it idealizes.
// The tree is mozjemalloc's too: a left-leaning red-black tree with two-word
// nodes (left; right with the colour in its low bit), no parent pointers and
// no cached minimum (structures/llrb_tree.h). How faithful: these are
// mozjemalloc's:
// - the choices and the node size;
// - the tree's shape rules (a 2-3-4 tree, a 4-node as two red left links in
//   a row);
// - the walk to the minimum and the balancing. Insert splits 4-nodes on the
//   way down and erase moves red links down, each in one pass from the root
//   with no path kept.
// What differs:
// every link the tree follows is verified first (structures/verified_links.h);
// the shipped twins (libshipped-malloc-moz_tree.so) leave that out, for the
// cost as mozjemalloc paid it (containers/README.md, "The price of the link
// checks"). mozjemalloc kept the node in the page map entry of the
// run's first page: -Dhook_placement=page_map does that (arena/run.h); by
// default the node is in the run header.
// Complexity:
// - pick O(1) with a non-full current run, else O(log n) (the walk to the
//   minimum and its removal).
// - insert O(1) when the run becomes current, else O(log n).
// - erase O(1) for the current run, else O(log n) (a search from the root by
//   address: no parent pointers).
// - touched O(1), a no-op; check O(n).
// Memory: two words of the 24-byte ContainerHook; four words per bin (root,
// size, current run, whether it is full).
#pragma once

#include <cstddef>

#include "containers/address_order.h"
#include "containers/first_of.h"
#include "structures/llrb_tree.h"

namespace runsel {

template <OccupancyAccess Traits>
class MozTreeRuns {
 public:
  using Node = typename Traits::Node;

  Node* pick() {
    if (current_ != nullptr && !current_full_) return current_;
    return refill();
  }

  void insert(Node* run) {
    if (run == current_) {
      current_full_ = false;  // the full current run regained a region
    } else if (current_ == nullptr) {
      current_ = run;  // whatever its address
    } else if (address_less(run, current_)) {
      if (!current_full_) tree_.insert(current_);
      current_ = run;
      current_full_ = false;
    } else {
      tree_.insert(run);
    }
  }

  void erase(Node* run) {
    if (run != current_) {
      tree_.erase(run);
    } else if (Traits::free_regions(run) == 0) {
      current_full_ = true;  // dropped by the next pick(), unless a free reopens it first
    } else {
      current_ = nullptr;  // emptied
    }
  }

  void touched(Node*) {}
  std::size_t size() const { return tree_.size() + (current_ != nullptr && !current_full_); }

  // For tests: the tree's root, the current run, whether it is full.
  Node* root() const { return tree_.root(); }
  Node* current() const { return current_; }
  bool current_full() const { return current_full_; }

  // The tree's rules (llrb_tree.h), and the current run is not in the tree.
  bool check(const char** why) const {
    if (!tree_.check(why)) return false;
    if (current_full_ && current_ == nullptr) {
      return check_failed(why, "a full current run is recorded without a current run");
    }
    if (current_ != nullptr && tree_.contains(current_)) {
      return check_failed(why, "the current run is also in the tree");
    }
    return true;
  }

 private:
  // The tree's lowest run becomes current: mozjemalloc's GetNonFullBinRun, a
  // call of its own. Inlined into malloc, its walk made every small malloc
  // save one more register and reserve more stack (callgrind, as shipped, on
  // a Firefox content log: 2.2 instructions per call).
  [[gnu::noinline]] Node* refill() {
    current_full_ = false;
    current_ = take_first(tree_);
    return current_;
  }

  LlrbTree<Node, RunAddressLlrbOrder<Traits>> tree_;
  Node* current_ = nullptr;
  bool current_full_ = false;  // current_ filled: no longer a member
};

}  // namespace runsel
