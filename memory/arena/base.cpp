// Metadata allocator implementation (see base.h).
#include "arena/base.h"

#include <cstdint>

#include "arena/layout.h"
#include "platform/assert.h"
#include "platform/lock.h"
#include "platform/os.h"

namespace runsel::base {

constinit Lock g_lock;

namespace {

constexpr std::size_t kBlockSize = std::size_t{1} << 20;
constexpr unsigned kMinClassShift = 4;  // 16 bytes
constexpr unsigned kNumClasses = 40;    // up to 2^43 bytes

struct FreeBlock {
  FreeBlock* next;
};

constinit char* g_bump RUNSEL_GUARDED_BY(g_lock) = nullptr;  // next free byte of the current block
constinit char* g_bump_end RUNSEL_GUARDED_BY(g_lock) = nullptr;
constinit std::size_t g_mapped RUNSEL_GUARDED_BY(g_lock) = 0;
// Bytes of the pages of blocks touched by the bump pointer.
constinit std::size_t g_committed RUNSEL_GUARDED_BY(g_lock) = 0;
constinit FreeBlock* g_free[kNumClasses] RUNSEL_GUARDED_BY(g_lock) = {};

unsigned class_of(std::size_t size) {
  unsigned shift = kMinClassShift;
  while ((std::size_t{1} << shift) < size) ++shift;
  return shift - kMinClassShift;
}

// Commits (counts) the pages between the old and new bump pointers.
void advance_bump(std::size_t bytes) RUNSEL_REQUIRES(g_lock) {
  RUNSEL_ASSERT(bytes <= static_cast<std::size_t>(g_bump_end - g_bump));
  std::uintptr_t old_top = page_ceiling(reinterpret_cast<std::uintptr_t>(g_bump));
  g_bump += bytes;
  std::uintptr_t new_top = page_ceiling(reinterpret_cast<std::uintptr_t>(g_bump));
  g_committed += new_top - old_top;
}

}  // namespace

void* allocate(std::size_t size) {
  if (size == 0) size = 1;
  unsigned cls = class_of(size);
  if (cls >= kNumClasses) return nullptr;
  std::size_t rounded = std::size_t{1} << (cls + kMinClassShift);
  LockGuard guard(g_lock);
  if (FreeBlock* block = g_free[cls]) {
    g_free[cls] = block->next;
    return block;
  }
  if (g_bump == nullptr || static_cast<std::size_t>(g_bump_end - g_bump) < rounded) {
    std::size_t block_size = rounded > kBlockSize ? page_ceiling(rounded) : kBlockSize;
    void* block = os::map_aligned(block_size, kPageSize);
    if (block == nullptr) return nullptr;
    g_mapped += block_size;
    // The rest of the old block is abandoned (it was never committed).
    g_bump = static_cast<char*>(block);
    g_bump_end = g_bump + block_size;
  }
  void* result = g_bump;
  advance_bump(rounded);
  return result;
}

void release(void* p, std::size_t size) {
  if (p == nullptr) return;
  unsigned cls = class_of(size == 0 ? 1 : size);
  LockGuard guard(g_lock);
  FreeBlock* block = static_cast<FreeBlock*>(p);
  block->next = g_free[cls];
  g_free[cls] = block;
}

Usage usage() {
  LockGuard guard(g_lock);
  return Usage{g_mapped, g_committed};
}

// The fork handlers hold the lock across fork(), from one function to another:
// beyond what the thread-safety analysis can follow.
void lock_for_fork() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_lock.lock(); }
void unlock_after_fork_in_parent() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_lock.unlock(); }
void reset_after_fork_in_child() { g_lock.reset_in_child(); }

}  // namespace runsel::base
