// How a structure verifies a link it read from a node before it follows it.
// Run headers are user-reachable memory: a write into one can point its links
// anywhere, so the run containers check every link on the paths that write
// through links (insert, erase, rebalancing) before dereferencing it. The
// node representation (a tree's or heap's Rep, a list container's traits)
// says what a valid link is:
//   static bool linked(const Node* member, const Node* neighbour)
// It is true when `neighbour`, read from `member`'s links, is null or a node
// of the same structure. For runs (RunTraits::linked in arena/run_links.h) that
// is the header of a run of the same bin. It is judged first by its address:
// one of the two runs the bin accepted last; else page-aligned, past the
// chunk header, in member's chunk or another chunk of its arena. Only then is
// it judged by the check word read from `neighbour`. A Rep without linked()
// (the arena's own trees, whose nodes live in allocator metadata) is trusted
// and pays nothing.
// -DRUNSEL_VERIFY_LINKS=0 turns the verification off for every structure
// (meson's profile-malloc-shipped-<container> twins, for the cost of the
// containers as their allocators ship them, with no hardening). The checks
// every container shares (the run header's keyed check on free, the bitmap's
// double-free check, the page map) stay.
#pragma once

#include <concepts>

#include "platform/fatal.h"

namespace runsel {

// What every structure's Rep gives: Rep::links(node), the node's embedded
// links of the structure's kind (`Links`), and Rep::less, a strict total
// order. A Rep may also define linked() (VerifiesLinks, below).
template <class Rep, class Node, class Links>
concept OrderedRep = requires(Node* node, const Node* a, const Node* b) {
  { Rep::links(node) } -> std::same_as<Links&>;
  { Rep::less(a, b) } -> std::same_as<bool>;
};

#ifndef RUNSEL_VERIFY_LINKS
#define RUNSEL_VERIFY_LINKS 1
#endif
inline constexpr bool kVerifyLinks = RUNSEL_VERIFY_LINKS != 0;

template <class Rep, class Node>
concept VerifiesLinks = kVerifyLinks && requires(const Node* member, const Node* neighbour) {
  { Rep::linked(member, neighbour) } -> std::same_as<bool>;
};

// `link`, read from `from`'s links: returned if Rep accepts it (or verifies
// nothing), else fatal naming `from`.
template <class Rep, class Node>
inline Node* verified_link(Node* from, Node* link) {
  if constexpr (VerifiesLinks<Rep, Node>) {
    if (!Rep::linked(from, link)) [[unlikely]]
      container_links_damaged(from);
  }
  return link;
}

// A structural agreement between `from` and `other` (a back link names the
// node it should): fatal naming both when it fails and Rep verifies links.
template <class Rep, class Node>
inline void verify_agrees(bool agrees, const Node* from, const Node* other) {
  if constexpr (VerifiesLinks<Rep, Node>) {
    if (!agrees) [[unlikely]]
      container_links_damaged(from, other);
  }
}

}  // namespace runsel
