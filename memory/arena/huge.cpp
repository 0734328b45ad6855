// Huge allocation bookkeeping (see huge.h). Committed bytes of a huge
// allocation are its usable size: pages past it were never touched, or were
// purged when the allocation shrank.
#include "arena/huge.h"

#include <cstring>
#include <new>

#include "arena/base.h"
#include "arena/layout.h"
#include "platform/lock.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"
#include "structures/rb_tree.h"

namespace runsel::huge {

namespace {

struct Node {
  RbLinks<Node> links;
  char* address;
  std::size_t mapped;  // chunk multiple
  std::size_t usable;  // page multiple <= mapped
};

struct ByAddress {
  static RbLinks<Node>& links(Node* n) { return n->links; }
  static bool less(const Node* a, const Node* b) { return a->address < b->address; }
};

constexpr std::size_t kRecentSlots = 64;

constinit Lock g_lock;
constinit RbTree<Node, ByAddress> g_tree;
constinit Figures g_figures;
constinit const void* g_recent[kRecentSlots] = {};
constinit std::size_t g_recent_next = 0;

// The live node starting exactly at p, or null. Caller holds g_lock.
Node* find(const void* p) {
  Node* node = g_tree.first_not_below([p](const Node* n) { return n->address < p; });
  return node != nullptr && node->address == p ? node : nullptr;
}

// The live node covering p, or null. Caller holds g_lock, so the registry's
// huge entries (written under g_lock) name live nodes.
Node* covering(const void* p) {
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  return owner.is_huge() ? owner.as<Node>() : nullptr;
}

}  // namespace

void* allocate(std::size_t size, std::size_t alignment) {
  const std::size_t usable = page_ceiling(size);
  const std::size_t mapped = chunk_ceiling(usable);
  if (usable < size || mapped < usable) return nullptr;
  void* memory = os::map_aligned(mapped, alignment);
  if (memory == nullptr) return nullptr;
  Node* node = static_cast<Node*>(base::allocate(sizeof(Node)));
  if (node == nullptr) {
    os::unmap(memory, mapped);
    return nullptr;
  }
  node->address = static_cast<char*>(memory);
  node->mapped = mapped;
  node->usable = usable;
  LockGuard guard(g_lock);
  if (!ChunkRegistry::set_range(memory, mapped, ChunkOwner::huge(node))) {
    ChunkRegistry::set_range(memory, mapped, ChunkOwner::none());
    os::unmap(memory, mapped);
    base::release(node, sizeof(Node));
    return nullptr;
  }
  g_tree.insert(node);
  g_figures.mapped += mapped;
  g_figures.allocated += usable;
  ++g_figures.count;
  ++g_figures.nmalloc;
  return memory;
}

Problem release(void* p) {
  Node* node;
  {
    LockGuard guard(g_lock);
    node = find(p);
    if (node == nullptr) {
      if (covering(p) != nullptr) return Problem::kInterior;
      for (const void* recent : g_recent) {
        if (recent == p) return Problem::kDoubleFree;
      }
      return Problem::kUnknown;
    }
    g_tree.erase(node);
    g_figures.mapped -= node->mapped;
    g_figures.allocated -= node->usable;
    --g_figures.count;
    ++g_figures.nfree;
    g_recent[g_recent_next] = p;
    g_recent_next = (g_recent_next + 1) % kRecentSlots;
    ChunkRegistry::set_range(node->address, node->mapped, ChunkOwner::none());
  }
  os::unmap(node->address, node->mapped);
  base::release(node, sizeof(Node));
  return Problem::kNone;
}

bool recently_freed(const void* p) {
  LockGuard guard(g_lock);
  for (const void* recent : g_recent) {
    if (recent == p && find(p) == nullptr) return true;
  }
  return false;
}

std::size_t usable_size(const void* p, Problem* problem) {
  LockGuard guard(g_lock);
  if (Node* node = find(p)) {
    *problem = Problem::kNone;
    return node->usable;
  }
  *problem = covering(p) != nullptr ? Problem::kInterior : Problem::kUnknown;
  return 0;
}

bool resize_in_place(void* p, std::size_t old_usable, std::size_t new_size) {
  const std::size_t usable = page_ceiling(new_size);
  const std::size_t mapped = chunk_ceiling(usable);
  LockGuard guard(g_lock);
  Node* node = find(p);
  if (node == nullptr || node->usable != old_usable) return false;
  char* base_address = node->address;
  if (mapped > node->mapped) {
    // Grow the mapping where it is, if the address range after it is free.
    char* end = base_address + node->mapped;
    if (!os::map_fixed_if_free(end, mapped - node->mapped)) return false;
    if (!ChunkRegistry::set_range(end, mapped - node->mapped, ChunkOwner::huge(node))) {
      ChunkRegistry::set_range(end, mapped - node->mapped, ChunkOwner::none());
      os::unmap(end, mapped - node->mapped);
      return false;
    }
  } else if (mapped < node->mapped) {
    ChunkRegistry::set_range(base_address + mapped, node->mapped - mapped, ChunkOwner::none());
    os::unmap(base_address + mapped, node->mapped - mapped);
  }
  if (usable < node->usable && usable < mapped) {
    // Pages between the new usable end and the mapping end may be dirty.
    os::purge(base_address + usable, std::min(node->usable, mapped) - usable);
  }
  g_figures.mapped += mapped;
  g_figures.mapped -= node->mapped;
  g_figures.allocated += usable;
  g_figures.allocated -= node->usable;
  node->mapped = mapped;
  node->usable = usable;
  return true;
}

Figures figures() {
  LockGuard guard(g_lock);
  return g_figures;
}

bool walk_and_compare() {
  LockGuard guard(g_lock);
  const char* why = nullptr;
  if (!g_tree.check(&why)) return false;
  Figures walked;
  for (Node* n = g_tree.first(); n != nullptr; n = g_tree.next(n)) {
    walked.mapped += n->mapped;
    walked.allocated += n->usable;
    ++walked.count;
    if (n->usable > n->mapped || n->mapped % kChunkSize != 0 || n->usable % kPageSize != 0) {
      return false;
    }
  }
  return walked.mapped == g_figures.mapped && walked.allocated == g_figures.allocated &&
         walked.count == g_figures.count;
}

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork_in_parent() { g_lock.unlock(); }
void reset_after_fork_in_child() { g_lock.reset_in_child(); }

}  // namespace runsel::huge
