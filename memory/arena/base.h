// The metadata allocator: arenas, huge-allocation nodes and container side
// arrays live here, never in the heap they describe. Bump allocation from
// mapped blocks, with power-of-two free lists so metadata can be recycled.
#pragma once

#include <cstddef>

#include "platform/lock.h"
#include "structures/chunk_registry.h"

namespace runsel::base {

// Guards the metadata allocator's blocks and free lists. Taken under an
// arena's, the huge or the init lock; before the registry's in fork
// preparation, never together with it otherwise.
extern Lock g_lock RUNSEL_ACQUIRED_BEFORE(g_registry_lock);

// Returns at least `size` bytes, 16-byte aligned; zeroed the first time the
// memory is handed out, arbitrary when recycled. nullptr if out of memory.
void* allocate(std::size_t size);
// Returns memory from allocate(size) (the same size) for reuse.
void release(void* p, std::size_t size);

struct Usage {
  std::size_t mapped;     // bytes of blocks mapped
  std::size_t committed;  // bytes of blocks handed out, rounded up to pages
};
Usage usage();

void lock_for_fork();
void unlock_after_fork_in_parent();
void reset_after_fork_in_child();

}  // namespace runsel::base
