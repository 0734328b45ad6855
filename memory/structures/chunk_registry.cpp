// Chunk registry storage: leaves are mapped on demand and never freed, so a
// lock-free reader can never see a leaf disappear.
#include "structures/chunk_registry.h"

#include "platform/lock.h"
#include "platform/os.h"

namespace runsel {

constinit std::atomic<ChunkRegistry::Leaf*> ChunkRegistry::root_[std::size_t{1} << kRootBits] = {};

constinit Lock g_registry_lock;

namespace {
constinit std::size_t g_leaf_bytes RUNSEL_GUARDED_BY(g_registry_lock) = 0;
}  // namespace

bool ChunkRegistry::set_range(const void* chunk, std::size_t size, ChunkOwner owner) {
  LockGuard guard(g_registry_lock);
  std::uintptr_t first = reinterpret_cast<std::uintptr_t>(chunk) >> kChunkShift;
  std::uintptr_t count = (size + kChunkMask) >> kChunkShift;
  for (std::uintptr_t key = first; key < first + count; ++key) {
    if (key >> kKeyBits) return false;
    std::atomic<Leaf*>& slot = root_[key >> kLeafBits];
    Leaf* leaf = slot.load(std::memory_order_relaxed);
    if (leaf == nullptr) {
      if (owner.is_none()) continue;
      leaf = static_cast<Leaf*>(os::map_aligned(kLeafBytes, 4096));
      if (leaf == nullptr) return false;
      g_leaf_bytes += kLeafBytes;
      slot.store(leaf, std::memory_order_release);
    }
    leaf->entries[key & (kLeafEntries - 1)].store(owner.word(), std::memory_order_release);
  }
  return true;
}

std::size_t ChunkRegistry::mapped_bytes() {
  LockGuard guard(g_registry_lock);
  return g_leaf_bytes;
}

// The fork handlers hold the lock across fork(), from one function to another:
// beyond what the thread-safety analysis can follow.
void ChunkRegistry::lock_for_fork() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_registry_lock.lock(); }
void ChunkRegistry::unlock_after_fork_in_parent() RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  g_registry_lock.unlock();
}
void ChunkRegistry::reset_after_fork_in_child() { g_registry_lock.reset_in_child(); }

}  // namespace runsel
