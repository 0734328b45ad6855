// Initialisation, per-thread arena choice and fork safety.
// Threads get arenas round-robin over 4 per CPU (at most kMaxArenas); the
// first thread to allocate (normally main) gets arena 0.
#include <pthread.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>

#include "arena/base.h"
#include "arena/huge.h"
#include "frontend/frontend.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"

namespace runsel {

namespace {

constinit Lock g_init_lock;
constinit Arena* g_arenas[kMaxArenas] = {};
constinit std::atomic<std::size_t> g_arena_count{0};
constinit std::size_t g_arena_limit = 0;
constinit std::size_t g_dirty_max_pages = Arena::kDefaultDirtyMaxPages;
constinit std::atomic<unsigned> g_next_thread{0};
constinit std::atomic<bool> g_fork_handlers_registered{false};

void prepare_fork() {
  g_init_lock.lock();
  for (std::size_t i = 0; i < g_arena_count.load(std::memory_order_relaxed); ++i) {
    g_arenas[i]->lock.lock();
  }
  huge::lock_for_fork();
  base::lock_for_fork();
  ChunkRegistry::lock_for_fork();
}

void after_fork_in_parent() {
  ChunkRegistry::unlock_after_fork_in_parent();
  base::unlock_after_fork_in_parent();
  huge::unlock_after_fork_in_parent();
  for (std::size_t i = g_arena_count.load(std::memory_order_relaxed); i-- > 0;) {
    g_arenas[i]->lock.unlock();
  }
  g_init_lock.unlock();
}

void after_fork_in_child() {
  ChunkRegistry::reset_after_fork_in_child();
  base::reset_after_fork_in_child();
  huge::reset_after_fork_in_child();
  for (std::size_t i = 0; i < g_arena_count.load(std::memory_order_relaxed); ++i) {
    g_arenas[i]->lock.reset_in_child();
  }
  g_init_lock.reset_in_child();
}

// Reads a positive integer from the environment (no allocation).
std::size_t env_size(const char* name, std::size_t fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  std::size_t value = 0;
  for (; *text >= '0' && *text <= '9'; ++text)
    value = value * 10 + static_cast<std::size_t>(*text - '0');
  return *text == '\0' ? value : fallback;
}

// Caller holds g_init_lock.
void initialise_locked() {
  if (g_arena_limit != 0) return;
  std::size_t limit = 4 * std::size_t{os::cpu_count()};
  limit = env_size("RUNSEL_ARENAS", limit);
  if (limit < 1) limit = 1;
  if (limit > kMaxArenas) limit = kMaxArenas;
  g_dirty_max_pages = env_size("RUNSEL_DIRTY_MAX_PAGES", Arena::kDefaultDirtyMaxPages);
  g_arena_limit = limit;
}

}  // namespace

constinit thread_local Arena* t_arena = nullptr;

__attribute__((noinline)) Arena* choose_arena() {
  Arena* arena;
  {
    LockGuard guard(g_init_lock);
    initialise_locked();
    std::size_t index = g_next_thread.fetch_add(1, std::memory_order_relaxed) % g_arena_limit;
    if (g_arenas[index] == nullptr) {
      g_arenas[index] = Arena::create(static_cast<unsigned>(index), g_dirty_max_pages);
      if (g_arenas[index] == nullptr) return nullptr;
      // Publish arenas in index order so readers can walk 0..count-1.
      std::size_t count = g_arena_count.load(std::memory_order_relaxed);
      while (count < kMaxArenas && g_arenas[count] != nullptr) ++count;
      g_arena_count.store(count, std::memory_order_release);
    }
    arena = g_arenas[index];
  }
  t_arena = arena;
  // Registered after the arena is usable: pthread_atfork may itself allocate.
  if (!g_fork_handlers_registered.exchange(true)) {
    pthread_atfork(prepare_fork, after_fork_in_parent, after_fork_in_child);
  }
  return arena;
}

std::size_t arena_count() { return g_arena_count.load(std::memory_order_acquire); }

Arena* arena_at(std::size_t index) { return index < arena_count() ? g_arenas[index] : nullptr; }

}  // namespace runsel
