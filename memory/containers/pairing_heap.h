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
// Complexity: insert O(1); pick O(1); erase of the root amortised O(log n)
// (two-pass pairing over its children, done iteratively: no recursion, so no
// stack depth proportional to the heap); erase of another member O(1) to
// unlink plus the pairing of its own children; touched O(1), a no-op; check
// O(n) without recursion or allocation. Memory: the three words of the
// 24-byte ContainerHook (leftmost child, next sibling, previous sibling or
// parent); two words per bin (root, size).
#pragma once

#include <cstddef>

#include "containers/address_order.h"
#include "containers/container.h"
#include "containers/hook.h"

namespace runsel {

template <class Node, class HookOf, class Metadata>
requires HookAccess<HookOf, Node>
class PairingHeapRuns {
 public:
  void insert(Node* run) {
    PairingLinks<Node>& own = links(run);
    own.child = nullptr;
    own.next = nullptr;
    own.prev = nullptr;
    root_ = root_ == nullptr ? run : meld(root_, run);
    ++size_;
  }

  void erase(Node* run) {
    --size_;
    if (run == root_) {
      root_ = pair_up(links(run).child);
      return;
    }
    // Unlink the run (and its subtree) from its parent's child list.
    PairingLinks<Node>& own = links(run);
    if (links(own.prev).child == run) {
      links(own.prev).child = own.next;  // leftmost child: prev is the parent
    } else {
      links(own.prev).next = own.next;
    }
    if (own.next != nullptr) links(own.next).prev = own.prev;
    // Its children, paired into one heap, hang below the root again: every
    // one of them is above the root's address.
    if (Node* orphans = pair_up(own.child)) root_ = meld(root_, orphans);
  }

  Node* pick() const { return root_; }
  void touched(Node*) {}
  std::size_t size() const { return size_; }

  // Invariants: the root has no siblings and no parent; every child list is
  // doubly linked (a leftmost child's prev is its parent, any other child's
  // prev its left sibling); every run is above its parent's address; exactly
  // size_ runs are reachable. The walk is pre-order through the links, with
  // no stack, and never follows a link it has not verified.
  bool check(const char** why) const {
    if (root_ == nullptr) {
      return size_ == 0 ? true : check_failed(why, "root is null but size() is not zero");
    }
    if (links(root_).prev != nullptr || links(root_).next != nullptr) {
      return check_failed(why, "the root has a parent or a sibling");
    }
    std::size_t count = 0;
    Node* run = root_;
    for (;;) {
      if (++count > size_) return check_failed(why, "more runs reachable than size()");
      Node* expected_prev = run;
      std::size_t siblings = 0;
      for (Node* kid = links(run).child; kid != nullptr; kid = links(kid).next) {
        if (++siblings > size_) return check_failed(why, "a child list longer than size()");
        if (links(kid).prev != expected_prev)
          return check_failed(why, "a child's prev link is wrong");
        if (!less(run, kid)) return check_failed(why, "a child is not above its parent's address");
        expected_prev = kid;
      }
      if (links(run).child != nullptr) {
        run = links(run).child;
        continue;
      }
      // Climb until a run with an unvisited next sibling (or the root).
      for (;;) {
        if (run == root_) {
          if (count != size_) return check_failed(why, "fewer runs reachable than size()");
          return true;
        }
        if (links(run).next != nullptr) {
          run = links(run).next;
          break;
        }
        run = parent_of(run);
      }
    }
  }

 private:
  static PairingLinks<Node>& links(Node* run) { return HookOf::hook(run).pairing; }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }

  // The parent of a non-root run: back along the siblings to the leftmost,
  // whose prev is the parent.
  static Node* parent_of(Node* run) {
    while (links(links(run).prev).child != run) run = links(run).prev;
    return links(run).prev;
  }

  // Melds two heap roots (their own prev and next are ignored): the higher
  // becomes the leftmost child of the lower, which is returned. The winner's
  // prev and next are left as they were; callers set them.
  static Node* meld(Node* a, Node* b) {
    if (less(b, a)) {
      Node* swap = a;
      a = b;
      b = swap;
    }
    PairingLinks<Node>& top = links(a);
    PairingLinks<Node>& below = links(b);
    below.prev = a;
    below.next = top.child;
    if (top.child != nullptr) links(top.child).prev = b;
    top.child = b;
    return a;
  }

  // Two-pass pairing of the sibling list starting at `first`, iteratively:
  // pass one melds neighbours left to right and chains the results through
  // `next` in reverse; pass two melds that chain from the rightmost pair
  // leftwards. Returns the new root (prev and next cleared), or nullptr.
  static Node* pair_up(Node* first) {
    if (first == nullptr) return nullptr;
    Node* pairs = nullptr;
    Node* cursor = first;
    while (cursor != nullptr) {
      Node* a = cursor;
      Node* b = links(a).next;
      Node* merged = a;
      if (b != nullptr) {
        cursor = links(b).next;
        merged = meld(a, b);
      } else {
        cursor = nullptr;
      }
      links(merged).next = pairs;
      pairs = merged;
    }
    Node* result = pairs;
    pairs = links(pairs).next;
    while (pairs != nullptr) {
      Node* following = links(pairs).next;
      result = meld(result, pairs);
      pairs = following;
    }
    links(result).prev = nullptr;
    links(result).next = nullptr;
    return result;
  }

  Node* root_ = nullptr;  // the lowest run; prev and next are null
  std::size_t size_ = 0;
};

}  // namespace runsel
