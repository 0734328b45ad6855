// RunTraits::linked: whether a container may follow a link from one run of a
// bin to another (containers/hook.h, structures/verified_links.h). Inline: the
// containers call it on every step. Included at the end of arena.h, since it
// needs the whole Arena.
#pragma once

#include <cstdint>

#include "arena/arena.h"
#include "arena/keyed_check.h"
#include "structures/chunk_registry.h"

namespace runsel {

// Whether `chunk` (chunk-aligned) is a chunk of the arena `bin` belongs to,
// by the chunk registry; if so, remembered as the bin's linked_chunk. The
// links of a bin's runs mostly stay within one or two chunks, so the lookup
// is rare. Inline all the same: a call here would make malloc and free save
// four more registers on every call (the values live across it).
inline bool linked_chunk_is_arenas(Bin* bin, std::uintptr_t chunk) {
  const ChunkOwner owner = ChunkRegistry::lookup(reinterpret_cast<const void*>(chunk));
  if (!owner.is_arena_chunk()) return false;
  // The bin lies inside the Arena object that owns the chunk: one of its bins.
  const std::uintptr_t arena = reinterpret_cast<std::uintptr_t>(owner.as<Arena>());
  if (reinterpret_cast<std::uintptr_t>(bin) - arena >= sizeof(Arena)) return false;
  bin->linked_chunk = chunk;
  return true;
}

// Judged without trusting `neighbour`. It is accepted at once if it is one of
// the two runs of member's bin this check accepted last (Bin::linked_runs,
// forgotten when a run is released). Otherwise:
// - It must be the start of a usable page (run headers are page-aligned, past
//   the chunk header and guard page). That page must be in `member`'s chunk,
//   in the bin's linked_chunk, or in another chunk the registry gives to
//   member's arena, so that reading it is safe.
// - Then its header must carry the keyed check of member's bin at its
//   address. A header written by the program cannot carry it without the key
//   (in a large block, or a freed run's old header: release_small_run wipes
//   its check). A run of another bin or arena carries it only by a 1 in 2^32
//   chance (the check mixes the bin pointer in nonlinearly), so its bin field
//   needs no comparison of its own.
// The page map is not read: it is a cache miss per link on the trees' paths.
inline bool RunTraits::linked(const Run* member, const Run* neighbour) {
  if (neighbour == nullptr) return true;
  Bin* bin = member->bin;
  if (neighbour == bin->linked_runs[0] || neighbour == bin->linked_runs[1]) return true;
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(neighbour);
  // Page-aligned and at least kFirstUsablePage pages into its chunk, in one
  // test: below that page the offset wraps around and sets bits above the
  // chunk's.
  constexpr std::uintptr_t kFirstUsableOffset = kFirstUsablePage << kPageShift;
  if ((((address & kChunkMask) - kFirstUsableOffset) & (kPageMask | ~kChunkMask)) != 0)
    return false;
  const std::uintptr_t chunk = address & ~kChunkMask;
  if (((address ^ reinterpret_cast<std::uintptr_t>(member)) & ~kChunkMask) != 0 &&
      chunk != bin->linked_chunk && !linked_chunk_is_arenas(bin, chunk)) [[unlikely]]
    return false;
  if (neighbour->check != keyed_check32_mixed(bin->check_factor, address, bin->check_rotated))
    return false;
  bin->linked_runs[1] = bin->linked_runs[0];
  bin->linked_runs[0] = neighbour;
  return true;
}

}  // namespace runsel
