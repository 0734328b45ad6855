// Intrusive pairing heaps over nodes that embed PairingLinks<Node>; the order
// and the place of the links come from a representation type Rep (see
// PairingRep), as for RbTree.
//
// PairingHeap melds eagerly: an insert is one comparison with the root and a
// link, so the root is the minimum after every call, and the removal of the
// root pairs up all of its children (two-pass pairing). LazyPairingHeap keeps
// the same root but appends inserts to an auxiliary list of trees hanging off
// the root's `next` link. It melds the front of that list a little on each
// insert: a binary counter, so after the k-th append it melds the front pair
// ctz(k) times, and the list holds about log2 k trees of doubling sizes. It
// pairs the list up only when the root leaves. An insert that is below the
// root becomes the root at once, the old root and its list beneath it. Both
// are one BasicPairingHeap, which differ only in where a tree above the root
// goes.
// Complexity (both): insert O(1) (amortised for the lazy heap's melds);
// first() O(1); erase of the root amortised O(log n); erase of another node
// O(1) to unlink plus the pairing of its own children; check() O(n). Every
// pass is iterative: no recursion, no stack depth proportional to the heap.
// Links are verified where the Rep says how (structures/verified_links.h):
// insert and erase check every link they read from a node before following
// it (a node of the heap whose prev link names the node it hangs from), and
// abort naming the node when one does not; check() does not.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "platform/assert.h"
#include "structures/check_failed.h"
#include "structures/pairing_links.h"
#include "structures/verified_links.h"

namespace runsel {

// Rep::links(node) gives the node's embedded links; Rep::less is a strict
// total order. A Rep may define linked() to have the links it follows
// verified (structures/verified_links.h).
template <class Rep, class Node>
concept PairingRep = OrderedRep<Rep, Node, PairingLinks<Node>>;

// What both heaps do to trees: meld, pair up, unlink, verify.
template <class Node, class Rep>
requires PairingRep<Rep, Node>
struct PairingTrees {
  static PairingLinks<Node>& links(Node* node) { return Rep::links(node); }

  static constexpr bool kVerifies = VerifiesLinks<Rep, Node>;

  // The first node of a list that hangs from `from` (its child list, or a
  // root's aux list), verified before anything follows it: null, or a node
  // of the heap whose prev link is `from`.
  static Node* checked_first(Node* from, Node* first) {
    verified_link<Rep>(from, first);
    if constexpr (kVerifies) {
      if (first != nullptr) verify_agrees<Rep>(links(first).prev == from, from, first);
    }
    return first;
  }
  static Node* checked_child(Node* node) { return checked_first(node, links(node).child); }
  // The sibling after `node` (or the next aux tree after a root): null, or a
  // node of the heap whose prev link is `node`.
  static Node* checked_next(Node* node) { return checked_first(node, links(node).next); }

  static void init(Node* node) {
    PairingLinks<Node>& own = links(node);
    own.child = nullptr;
    own.next = nullptr;
    own.prev = nullptr;
  }

  // Melds two tree roots (their own prev and next are ignored): the higher
  // becomes the leftmost child of the lower, which is returned. The winner's
  // prev and next are left as they were; callers set them.
  // Which of the two wins is a coin toss for random addresses, so the choice
  // is made with selects, not a branch the processor would mispredict half the
  // time.
  static Node* meld(Node* a, Node* b) {
    // Swap a and b when b wins: mask is all ones then, zero otherwise.
    const std::uintptr_t mask = std::uintptr_t{0} - std::uintptr_t{Rep::less(b, a)};
    const std::uintptr_t swap =
        (reinterpret_cast<std::uintptr_t>(a) ^ reinterpret_cast<std::uintptr_t>(b)) & mask;
    Node* winner = reinterpret_cast<Node*>(reinterpret_cast<std::uintptr_t>(a) ^ swap);
    Node* loser = reinterpret_cast<Node*>(reinterpret_cast<std::uintptr_t>(b) ^ swap);
    PairingLinks<Node>& top = links(winner);
    PairingLinks<Node>& below = links(loser);
    Node* old_child = checked_child(winner);
    below.prev = winner;
    below.next = old_child;
    if (old_child != nullptr) links(old_child).prev = loser;
    top.child = loser;
    return winner;
  }

  // Two-pass pairing of the sibling list starting at `first` (already
  // verified by the caller: checked_child or checked_next), iteratively.
  // Pass one reads the list through checked_next, melds neighbours left to
  // right and chains the results through `next` in reverse. Pass two melds
  // that chain (links written here) from the rightmost pair leftwards.
  // Returns the new root (prev and next cleared), or nullptr.
  static Node* pair_up(Node* first) {
    if (first == nullptr) return nullptr;
    Node* pairs = nullptr;
    Node* cursor = first;
    while (cursor != nullptr) {
      Node* a = cursor;
      Node* b = checked_next(a);
      Node* merged = a;
      if (b != nullptr) {
        cursor = checked_next(b);
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

  // Takes a node that has a prev (any node but a heap's root), with its
  // subtree, out of its sibling list.
  static void unlink(Node* node) {
    PairingLinks<Node>& own = links(node);
    // A member below the top: its parent or left sibling links to it.
    if constexpr (kVerifies) {
      Node* prev = verified_link<Rep>(node, own.prev);
      if (prev == nullptr) [[unlikely]]
        container_links_damaged(node);
      verify_agrees<Rep>(links(prev).child == node || links(prev).next == node, node, prev);
      checked_next(node);
    } else {
      RUNSEL_ASSERT(own.prev != nullptr &&
                    (links(own.prev).child == node || links(own.prev).next == node));
    }
    if (links(own.prev).child == node) {
      links(own.prev).child = own.next;  // leftmost child: prev is the parent
    } else {
      links(own.prev).next = own.next;
    }
    if (own.next != nullptr) links(own.next).prev = own.prev;
  }

  // The parent of a node below a tree's top: back along the siblings to the
  // leftmost, whose prev is the parent.
  static Node* parent_of(Node* node) {
    while (links(links(node).prev).child != node) node = links(node).prev;
    return links(node).prev;
  }

  // Verifies the tree below `top` (not top's own prev and next): every child
  // list is doubly linked (a leftmost child's prev is its parent, any other
  // child's prev its left sibling) and every node is above its parent. Adds
  // the nodes to *count and fails once it passes `limit`. The walk is
  // pre-order through the links, with no stack; it reads a child's prev to
  // check it (so dereferences unverified child and next links) and moves
  // only to nodes whose back link it has checked.
  static bool check_tree(Node* top, std::size_t limit, std::size_t* count, const char** why) {
    Node* node = top;
    for (;;) {
      if (++*count > limit) return check_failed(why, "more nodes reachable than size()");
      Node* expected_prev = node;
      std::size_t siblings = 0;
      for (Node* kid = links(node).child; kid != nullptr; kid = links(kid).next) {
        if (++siblings > limit) return check_failed(why, "a child list longer than size()");
        if (links(kid).prev != expected_prev)
          return check_failed(why, "a child's prev link is wrong");
        if (!Rep::less(node, kid)) return check_failed(why, "a child is not above its parent");
        expected_prev = kid;
      }
      if (links(node).child != nullptr) {
        node = links(node).child;
        continue;
      }
      // Climb until a node with an unvisited next sibling (or the top).
      for (;;) {
        if (node == top) return true;
        if (links(node).next != nullptr) {
          node = links(node).next;
          break;
        }
        node = parent_of(node);
      }
    }
  }
};

// Where a heap puts a tree that is above its root: an insert above the root,
// or the paired children of an erased node that was not the root.
enum class PairingInserts {
  kEager,  // the root's leftmost child at once
  kLazy,   // the front of the root's aux list, melded there a little at a time
};

// Both heaps: the root is the minimum after every call, its prev is null and
// its `next` is the aux list (always empty in the eager heap).
template <class Node, class Rep, PairingInserts kInserts>
requires PairingRep<Rep, Node>
class BasicPairingHeap {
 public:
  void insert(Node* node) {
    Trees::init(node);
    ++size_;
    if (root_ == nullptr) {
      root_ = node;
      return;
    }
    if (Rep::less(node, root_)) {
      // The old root, with its aux list, becomes the new root's only child
      // (the list its siblings).
      Trees::links(node).child = root_;
      Trees::links(root_).prev = node;
      root_ = node;
      restart_count();
      return;
    }
    if constexpr (kInserts == PairingInserts::kEager) {
      adopt(node);
    } else {
      append(node);
    }
  }

  void erase(Node* node) {
    --size_;
    if (node == root_) {
      Node* kids = Trees::pair_up(Trees::checked_child(node));
      Node* aux = Trees::pair_up(Trees::checked_next(node));  // null when eager
      root_ = kids == nullptr ? aux : aux == nullptr ? kids : Trees::meld(kids, aux);
      restart_count();
    } else {
      Trees::unlink(node);
      // Its children are above it, so above the root.
      if (Node* orphans = Trees::pair_up(Trees::checked_child(node))) {
        if constexpr (kInserts == PairingInserts::kEager) {
          adopt(orphans);
        } else {
          push_aux(orphans);
        }
      }
    }
    // A stale link to the erased node (left in a damaged header) then finds
    // no back link that agrees.
    if constexpr (Trees::kVerifies) Trees::init(node);
  }

  Node* first() const { return root_; }
  std::size_t size() const { return size_; }

  // Invariants:
  // - The root has no parent.
  // - Its `next` chain (the aux list, empty in the eager heap) is doubly
  //   linked from the root, and every tree on it is above the root, so the
  //   root is the minimum.
  // - The root's tree and every aux tree are heaps (check_tree).
  // - Exactly size() nodes are reachable.
  bool check(const char** why) const {
    const char* ignored;
    if (why == nullptr) why = &ignored;
    if (root_ == nullptr) {
      return size_ == 0 ? true : check_failed(why, "root is null but size() is not zero");
    }
    if (Trees::links(root_).prev != nullptr) return check_failed(why, "the root has a parent");
    if (kInserts == PairingInserts::kEager && Trees::links(root_).next != nullptr) {
      return check_failed(why, "the root of an eager heap has a sibling");
    }
    std::size_t count = 0;
    Node* previous = nullptr;
    for (Node* top = root_; top != nullptr; top = Trees::links(top).next) {
      if (previous != nullptr) {
        if (Trees::links(top).prev != previous) {
          return check_failed(why, "an aux tree's prev link is wrong");
        }
        if (!Rep::less(root_, top)) return check_failed(why, "an aux tree is not above the root");
      }
      if (!Trees::check_tree(top, size_, &count, why)) return false;
      previous = top;
    }
    return count == size_ ? true : check_failed(why, "fewer nodes reachable than size()");
  }

 private:
  using Trees = PairingTrees<Node, Rep>;

  // Makes a tree above the root the root's leftmost child.
  void adopt(Node* top) { push_front(top, Trees::links(root_).child); }

  // Puts a tree at the front of the aux list.
  void push_aux(Node* top) { push_front(top, Trees::links(root_).next); }

  // Links `top` in front of one of the root's lists (`head`: its child list
  // or its aux list); in both, the first element's prev link is the root.
  void push_front(Node* top, Node*& head) {
    Trees::checked_first(root_, head);
    PairingLinks<Node>& own = Trees::links(top);
    own.prev = root_;
    own.next = head;
    if (head != nullptr) Trees::links(head).prev = top;
    head = top;
  }

  // Appends an inserted node to the aux list as a binary counter: the k-th
  // append melds the list's front pair ctz(k) times, so the list holds about
  // log2 k trees of doubling sizes, and every meld is on headers just
  // touched. The first of those melds takes the new node and the old front
  // directly, without linking the node in first.
  void append(Node* node) {
    ++appended_;
    Node* front = Trees::checked_next(root_);
    if ((appended_ & 1) != 0 || front == nullptr) {
      push_aux(node);
      return;
    }
    Node* rest = Trees::checked_next(front);
    Node* merged = Trees::meld(node, front);
    link_front(merged, rest);
    for (std::size_t carries = appended_ >> 1; (carries & 1) == 0; carries >>= 1) {
      Node* second = Trees::links(merged).next;  // `rest`, linked just above
      if (second == nullptr) break;
      rest = Trees::checked_next(second);
      merged = Trees::meld(merged, second);
      link_front(merged, rest);
    }
  }

  // Makes `top` the aux list's front, followed by `rest`.
  void link_front(Node* top, Node* rest) {
    PairingLinks<Node>& own = Trees::links(top);
    own.prev = root_;
    own.next = rest;
    if (rest != nullptr) Trees::links(rest).prev = top;
    Trees::links(root_).next = top;
  }

  void restart_count() {
    if constexpr (kInserts == PairingInserts::kLazy) appended_ = 0;
  }

  struct NoCount {};

  Node* root_ = nullptr;
  std::size_t size_ = 0;
  // Lazy: appends since the aux list was last empty. The eager heap has no
  // count and stays two words.
  [[no_unique_address]] std::conditional_t<kInserts == PairingInserts::kLazy, std::size_t, NoCount>
      appended_{};
};

template <class Node, class Rep>
using PairingHeap = BasicPairingHeap<Node, Rep, PairingInserts::kEager>;

template <class Node, class Rep>
using LazyPairingHeap = BasicPairingHeap<Node, Rep, PairingInserts::kLazy>;

}  // namespace runsel
