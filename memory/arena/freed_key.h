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

// Process-random and never 0 once the first arena exists (Arena::create).
// Hidden: a declaration is not, with -fvisibility=hidden, so each use went
// through the GOT (a load of the address, then of the key).
[[gnu::visibility("hidden")]] extern constinit std::uintptr_t g_freed_key;

inline std::uintptr_t freed_key_of(const void* p) {
  return g_freed_key ^ reinterpret_cast<std::uintptr_t>(p);
}

// A remote-free queue's link, stored in a queued region's second word mixed
// with the region's key: a pointer is never written there in the clear, and
// a link rewritten by the program decodes to a region that does not carry
// the key (Arena::take_queued_remote_frees checks it before following it).
inline std::uintptr_t encode_queue_link(const void* region, const void* next) {
  return freed_key_of(region) ^ reinterpret_cast<std::uintptr_t>(next);
}
inline void* decode_queue_link(const void* region, std::uintptr_t word) {
  return reinterpret_cast<void*>(word ^ freed_key_of(region));
}

}  // namespace runsel
