// Huge allocation bookkeeping (see huge.h), and the cache of freed huge
// mappings. Committed bytes of a huge mapping are its `resident` prefix: a
// live allocation's usable size, plus, when it reuses a cached mapping, the
// pages past it that an earlier allocation may have touched (dirty); a cached
// mapping's whole resident prefix is dirty. Pages past `resident` were never
// touched, or were purged.
#include "arena/huge.h"

#include <cstring>
#include <new>

#include "arena/arena.h"
#include "arena/base.h"
#include "arena/layout.h"
#include "platform/assert.h"
#include "platform/fatal.h"
#include "platform/lock.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"
#include "structures/rb_tree.h"

namespace runsel::huge {

constinit Lock g_lock;

namespace {

struct Node {
  TreeLinks<Node> links;
  char* address;
  std::size_t mapped;      // chunk multiple
  std::size_t usable;      // page multiple <= resident; 0 while cached
  std::size_t resident;    // page multiple <= mapped: the prefix that may be resident
  std::uint64_t freed_at;  // when it entered the cache
  Node* next_cached;       // the cache, most recently freed first
};

struct ByAddress {
  static TreeLinks<Node>& links(Node* n) { return n->links; }
  static bool less(const Node* a, const Node* b) { return a->address < b->address; }
};

constexpr std::size_t kRecentSlots = 64;

constinit RbTree<Node, ByAddress> g_tree RUNSEL_GUARDED_BY(g_lock);
constinit Figures g_figures RUNSEL_GUARDED_BY(g_lock);
// The addresses of the last kRecentSlots huge frees, for double-free messages.
constinit const void* g_recent[kRecentSlots] RUNSEL_GUARDED_BY(g_lock) = {};
constinit std::size_t g_recent_next RUNSEL_GUARDED_BY(g_lock) = 0;
constinit Node* g_cache RUNSEL_GUARDED_BY(g_lock) = nullptr;
constinit CacheLimits g_limits RUNSEL_GUARDED_BY(g_lock);

// A cached mapping serves a request of `mapped` bytes if it is at least as big
// and not more than this many times bigger (address space, not memory: its
// pages past `resident` cost nothing).
constexpr std::size_t kMaxReuseRatio = 4;

// The live node starting exactly at p, or null.
Node* find(const void* p) RUNSEL_REQUIRES(g_lock) {
  Node* node = g_tree.first_not_below([p](const Node* n) { return n->address < p; });
  return node != nullptr && node->address == p ? node : nullptr;
}

// The live node covering p, or null. Under g_lock the registry's huge
// entries (written under g_lock) name live nodes.
Node* covering(const void* p) RUNSEL_REQUIRES(g_lock) {
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  return owner.is_huge() ? owner.as<Node>() : nullptr;
}

// Takes the smallest cached mapping that can serve `mapped` bytes, or null.
Node* take_cached(std::size_t mapped) RUNSEL_REQUIRES(g_lock) {
  Node** best = nullptr;
  for (Node** link = &g_cache; *link != nullptr; link = &(*link)->next_cached) {
    const std::size_t have = (*link)->mapped;
    if (have >= mapped && have / kMaxReuseRatio <= mapped &&
        (best == nullptr || have < (*best)->mapped))
      best = link;
  }
  if (best == nullptr) return nullptr;
  Node* node = *best;
  *best = node->next_cached;
  g_figures.cached_mapped -= node->mapped;
  g_figures.dirty -= node->resident;
  --g_figures.cached;
  return node;
}

// Unlinks the cached mappings that are too old or over the byte limit (the
// oldest first) into `*evicted`, to be unmapped after g_lock is released.
void evict_locked(std::uint64_t now, std::size_t limit_bytes, Node** evicted)
    RUNSEL_REQUIRES(g_lock) {
  std::size_t kept = 0;
  for (Node** link = &g_cache; *link != nullptr;) {
    Node* node = *link;
    const bool old = now - node->freed_at >= g_limits.max_age_ns;
    if (old || kept + node->mapped > limit_bytes) {
      *link = node->next_cached;
      g_figures.cached_mapped -= node->mapped;
      g_figures.dirty -= node->resident;
      --g_figures.cached;
      node->next_cached = *evicted;
      *evicted = node;
    } else {
      kept += node->mapped;
      link = &node->next_cached;
    }
  }
}

void unmap_evicted(Node* evicted) {
  while (evicted != nullptr) {
    Node* next = evicted->next_cached;
    os::unmap(evicted->address, evicted->mapped);
    base::release(evicted, sizeof(Node));
    evicted = next;
  }
}

// Makes a cached mapping live again for `usable` bytes.
void* reuse(Node* node, std::size_t usable, bool zero) RUNSEL_REQUIRES(g_lock) {
  RUNSEL_ASSERT(node->usable == 0 && node->resident <= node->mapped && usable <= node->mapped);
  if (!ChunkRegistry::set_range(node->address, node->mapped, ChunkOwner::huge(node))) {
    ChunkRegistry::set_range(node->address, node->mapped, ChunkOwner::none());
    os::unmap(node->address, node->mapped);
    base::release(node, sizeof(Node));
    return nullptr;
  }
  if (zero) {
    // Pages an earlier allocation touched are not zero; purged ones read as zero.
    const std::size_t touched = node->resident < usable ? node->resident : usable;
    if (touched != 0) os::purge(node->address, touched);
  }
  node->usable = usable;
  if (node->resident < usable) node->resident = usable;
  g_tree.insert(node);
  g_figures.mapped += node->mapped;
  g_figures.allocated += usable;
  g_figures.dirty += node->resident - usable;
  ++g_figures.count;
  ++g_figures.nmalloc;
  ++g_figures.reused;
  return node->address;
}

}  // namespace

void configure(const CacheLimits& limits) {
  LockGuard guard(g_lock);
  g_limits = limits;
}

void* allocate(std::size_t size, std::size_t alignment, bool zero) {
  RUNSEL_ASSERT(alignment >= kChunkSize && (alignment & (alignment - 1)) == 0);
  const std::size_t usable = page_ceiling(size);
  const std::size_t mapped = chunk_ceiling(usable);
  if (usable < size || mapped < usable) return nullptr;
  if (alignment <= kChunkSize) {
    LockGuard guard(g_lock);
    if (Node* node = take_cached(mapped)) return reuse(node, usable, zero);
  }
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
  node->resident = usable;
  node->next_cached = nullptr;
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
  Node* evicted = nullptr;
  const char* end = nullptr;  // of the allocation, when that is where the mapping ends
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
    if (node->usable == node->mapped) end = node->address + node->mapped;
    g_tree.erase(node);
    g_figures.mapped -= node->mapped;
    g_figures.allocated -= node->usable;
    g_figures.dirty -= node->resident - node->usable;
    --g_figures.count;
    ++g_figures.nfree;
    g_recent[g_recent_next] = p;
    g_recent_next = (g_recent_next + 1) % kRecentSlots;
    ChunkRegistry::set_range(node->address, node->mapped, ChunkOwner::none());
    if (g_limits.max_bytes >= node->mapped) {
      // Keep the mapping, its touched pages as they are, for the next huge request.
      const std::uint64_t now = os::monotonic_ns();
      node->usable = 0;
      node->freed_at = now;
      node->next_cached = g_cache;
      g_cache = node;
      g_figures.cached_mapped += node->mapped;
      g_figures.dirty += node->resident;
      ++g_figures.cached;
      evict_locked(now, g_limits.max_bytes, &evicted);
      node = nullptr;
    }
  }
  unmap_evicted(evicted);
  if (node != nullptr) {
    os::unmap(node->address, node->mapped);
    base::release(node, sizeof(Node));
  }
  if (end != nullptr && !chunk_canary_intact(end)) return Problem::kOverflowPastEnd;
  return Problem::kNone;
}

std::size_t release_cached(bool all) {
  Node* evicted = nullptr;
  {
    LockGuard guard(g_lock);
    if (g_cache == nullptr) return 0;
    evict_locked(os::monotonic_ns(), all ? 0 : g_limits.max_bytes, &evicted);
  }
  std::size_t bytes = 0;
  for (Node* n = evicted; n != nullptr; n = n->next_cached) bytes += n->resident;
  unmap_evicted(evicted);
  return bytes;
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
  if (usable < node->resident && usable < mapped) {
    // Pages between the new usable end and the mapping end may be dirty.
    os::purge(base_address + usable, std::min(node->resident, mapped) - usable);
  }
  g_figures.mapped += mapped;
  g_figures.mapped -= node->mapped;
  g_figures.allocated += usable;
  g_figures.allocated -= node->usable;
  g_figures.dirty -= node->resident - node->usable;
  node->mapped = mapped;
  node->usable = usable;
  node->resident = usable;
  return true;
}

Figures figures() {
  LockGuard guard(g_lock);
  return g_figures;
}

// Each difference is one line on stderr naming the mapping or the figure.
bool walk_and_compare() {
  LockGuard guard(g_lock);
  bool ok = true;
  const char* why = nullptr;
  if (!g_tree.check(&why)) {
    message("check: huge: the tree of live mappings: ", why);
    return false;
  }
  Figures walked;
  for (Node* n = g_tree.first(); n != nullptr; n = g_tree.next(n)) {
    walked.mapped += n->mapped;
    walked.allocated += n->usable;
    walked.dirty += n->resident - n->usable;
    ++walked.count;
    if (n->usable > n->resident || n->resident > n->mapped || n->mapped % kChunkSize != 0 ||
        n->usable % kPageSize != 0 || n->resident % kPageSize != 0) {
      message("check: huge: live mapping ", static_cast<const void*>(n->address), ": usable ",
              n->usable, ", resident ", n->resident, ", mapped ", n->mapped,
              " (must be page multiples, usable <= resident <= mapped, mapped whole chunks)");
      ok = false;
    }
  }
  for (Node* n = g_cache; n != nullptr; n = n->next_cached) {
    walked.cached_mapped += n->mapped;
    walked.dirty += n->resident;
    ++walked.cached;
    if (n->usable != 0 || n->resident > n->mapped || n->mapped % kChunkSize != 0) {
      message("check: huge: cached mapping ", static_cast<const void*>(n->address), ": usable ",
              n->usable, ", resident ", n->resident, ", mapped ", n->mapped,
              " (must be 0, <= mapped, whole chunks)");
      ok = false;
    }
    if (!ChunkRegistry::lookup(n->address).is_none()) {
      message("check: huge: cached mapping ", static_cast<const void*>(n->address),
              " is still registered as live");
      ok = false;
    }
  }
  auto compare = [&](const char* what, std::size_t counted, std::size_t found) {
    if (counted == found) return;
    message("check: huge: ", what, ": counters say ", counted, ", the walk finds ", found);
    ok = false;
  };
  compare("mapped", g_figures.mapped, walked.mapped);
  compare("allocated", g_figures.allocated, walked.allocated);
  compare("count", g_figures.count, walked.count);
  compare("dirty", g_figures.dirty, walked.dirty);
  compare("cached mapped", g_figures.cached_mapped, walked.cached_mapped);
  compare("cached", g_figures.cached, walked.cached);
  return ok;
}

// The fork handlers hold the lock across fork(), from one function to another:
// beyond what the thread-safety analysis can follow.
void lock_for_fork() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_lock.lock(); }
void unlock_after_fork_in_parent() RUNSEL_NO_THREAD_SAFETY_ANALYSIS { g_lock.unlock(); }
void reset_after_fork_in_child() { g_lock.reset_in_child(); }

}  // namespace runsel::huge
