// An intrusive doubly linked list over nodes that embed ListLinks<Node>; where
// the links are comes from a representation type Rep, as for the trees:
//   static ListLinks<Node>& links(Node*)
// and, optionally, linked() to have the links it follows verified
// (structures/verified_links.h: the run containers lifo and fullest_first).
// Without it (the arena's chunk lists, whose nodes are allocator metadata)
// nothing is verified and nothing is paid. With kTail the list also keeps
// its last node (push_back). Every call is O(1) but check(), O(n).
#pragma once

#include <cstddef>
#include <type_traits>

#include "platform/assert.h"
#include "platform/fatal.h"
#include "structures/check_failed.h"
#include "structures/verified_links.h"

namespace runsel {

template <class Node>
struct ListLinks {
  Node* prev;
  Node* next;
};

// The Rep of nodes whose links are the member `Member`.
template <class Node, ListLinks<Node> Node::*Member>
struct MemberLinks {
  static ListLinks<Node>& links(Node* node) { return node->*Member; }
};

template <class Node, class Rep, bool kTail = false>
class IntrusiveList {
 public:
  Node* front() const { return head_; }
  Node* back() const requires kTail { return tail_; }
  bool empty() const { return head_ == nullptr; }
  static Node* next(Node* node) { return Rep::links(node).next; }

  void push_front(Node* node) { link_between(nullptr, head_, node); }
  void push_back(Node* node) requires kTail { link_between(tail_, nullptr, node); }

  // Unlinks a member. When Rep verifies links, before writing through them:
  // both links are nodes of the list (or null), the previous node (or the
  // head) and the next node link back to `node`; afterwards its links are
  // cleared, so that a stale link to it finds no back link.
  void erase(Node* node) {
    ListLinks<Node>& own = Rep::links(node);
    Node* prev = verified_link<Rep>(node, own.prev);
    Node* next = verified_link<Rep>(node, own.next);
    if (prev != nullptr) {
      verify_agrees<Rep>(Rep::links(prev).next == node, node, prev);
    } else if (head_ != node) [[unlikely]] {
      if constexpr (kVerifies) container_links_damaged(node);  // not a member, or prev cleared
      RUNSEL_ASSERT(false);
    }
    if (next != nullptr) verify_agrees<Rep>(Rep::links(next).prev == node, node, next);
    bridge(prev, next, next, prev);
    if constexpr (kVerifies) own = {nullptr, nullptr};
  }

  // Walks the list: every node's prev is the node before it, and at most
  // `limit` nodes end at null (the tail, with kTail); adds the nodes to
  // *count. Safe on a damaged list (a cycle exceeds the limit).
  bool check(std::size_t limit, std::size_t* count, const char** why) const {
    Node* previous = nullptr;
    std::size_t seen = 0;
    for (Node* node = head_; node != nullptr; node = next(node)) {
      if (++seen > limit) return check_failed(why, "more nodes reachable than size()");
      if (Rep::links(node).prev != previous) {
        return check_failed(why, "a node's prev is not the node before it");
      }
      previous = node;
    }
    if constexpr (kTail) {
      if (tail_ != previous) return check_failed(why, "the tail is not the last node");
    }
    *count += seen;
    return true;
  }

 private:
  // Links `node` between `prev` (null: it becomes the head) and `next`
  // (null: it becomes the tail).
  void link_between(Node* prev, Node* next, Node* node) {
    Rep::links(node) = {prev, next};
    bridge(prev, next, node, node);
  }
  // Points prev's next (or the head) at `after_prev`, and next's prev (or
  // the tail) at `before_next`.
  void bridge(Node* prev, Node* next, Node* after_prev, Node* before_next) {
    (prev != nullptr ? Rep::links(prev).next : head_) = after_prev;
    if (next != nullptr) {
      Rep::links(next).prev = before_next;
    } else if constexpr (kTail) {
      tail_ = before_next;
    }
  }

  static constexpr bool kVerifies = VerifiesLinks<Rep, Node>;
  struct NoTail {};

  Node* head_ = nullptr;
  [[no_unique_address]] std::conditional_t<kTail, Node*, NoTail> tail_{};
};

}  // namespace runsel
