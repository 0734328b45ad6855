// The key a freed small region carries in its first word while runsel holds it
// outside its run (its bitmap bit still says allocated): queued on its arena's
// remote frees, or in a thread cache. A path that must know whether a region
// is live, without its arena's lock, reads that word:
// - No key: the region is the program's.
// - The key: the region is in a queue or a cache. Or the program wrote the
//   key by chance, which costs only a look in both.
#pragma once

#include <cstdint>

namespace runsel {

// Nine times the address, one instruction (lea) from it with no load: never 0,
// and for every address from 2^47 / 9 up (15.6 TiB; Linux maps chunks just
// below 2^47) between the two canonical halves, so that no pointer a program
// stores, its own address included (an empty list's head at a block's
// start), is ever one.
inline std::uintptr_t freed_key_of(const void* p) {
  return 9 * reinterpret_cast<std::uintptr_t>(p);
}

// The queue links' secret (below): process-random and never 0 once the first
// arena exists (Arena::create). Hidden: a declaration is not, with
// -fvisibility=hidden, so each use went through the GOT (a load of the
// address, then of the key).
[[gnu::visibility("hidden")]] extern constinit std::uintptr_t g_link_key;

// A remote-free queue's link, stored in a queued region's second word mixed
// with the region's address and g_link_key: a pointer is never written there
// in the clear (nor in a form the program can undo), and
// a link rewritten by the program decodes to a region that does not carry
// the key (Arena::take_queued_remote_frees checks it before following it).
inline std::uintptr_t encode_queue_link(const void* region, const void* next) {
  return g_link_key ^ reinterpret_cast<std::uintptr_t>(region) ^
         reinterpret_cast<std::uintptr_t>(next);
}
inline void* decode_queue_link(const void* region, std::uintptr_t word) {
  return reinterpret_cast<void*>(word ^ g_link_key ^ reinterpret_cast<std::uintptr_t>(region));
}

}  // namespace runsel
