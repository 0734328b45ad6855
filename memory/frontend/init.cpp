// Initialisation, per-thread arena choice and fork safety.
// A thread's first allocation attaches it to the arena with the fewest
// attached threads, creating one while fewer than kArenasPerCpu (1) per CPU
// exist (at most kMaxArenas), lowest index first; the first thread (normally main) gets
// arena 0. A thread that exits detaches (a pthread key's destructor), so the
// next thread reuses its arena and the dirty pages there instead of spreading
// a program that starts fresh threads over every arena (as jemalloc does).
#include <pthread.h>
#include <stdlib.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "arena/base.h"
#include "arena/huge.h"
#include "arena/size_classes.h"
#include "frontend/frontend.h"
#include "frontend/thread_cache.h"
#include "platform/fatal.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"

namespace runsel {

namespace {

// The init lock guards the settings read from the environment and the arena
// table's writes. An arena, once created, is never replaced: the entries
// below g_arena_count (published with release) are read without the lock,
// through published_arena().
constinit Lock g_init_lock RUNSEL_ACQUIRED_BEFORE(Arena::lock, huge::g_lock, base::g_lock,
                                                  g_registry_lock);
constinit Arena* g_arenas[kMaxArenas] RUNSEL_GUARDED_BY(g_init_lock) = {};
constinit std::atomic<std::size_t> g_arena_count{0};
constinit std::size_t g_arena_limit RUNSEL_GUARDED_BY(g_init_lock) = 0;  // 0: not initialised
constinit PurgeSettings g_purge_settings RUNSEL_GUARDED_BY(g_init_lock);
constinit huge::CacheLimits g_huge_cache RUNSEL_GUARDED_BY(g_init_lock);
// Threads attached to each arena.
constinit unsigned g_arena_threads[kMaxArenas] RUNSEL_GUARDED_BY(g_init_lock) = {};
// Created once under g_init_lock before g_detach_key_created is set; read
// only after that flag was read true under the lock.
constinit pthread_key_t g_detach_key;
constinit bool g_detach_key_created RUNSEL_GUARDED_BY(g_init_lock) = false;
constinit std::atomic<bool> g_fork_handlers_registered{false};

// Arena `index`, below a count read with acquire (its entry was written before
// that count was released, and never changes after).
Arena* published_arena(std::size_t index) RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  return g_arenas[index];
}

// The fork handlers take every lock before fork() and release them after it,
// from one function to another: beyond what the thread-safety analysis can follow.
void prepare_fork() RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
#if RUNSEL_THREAD_CACHE
  thread_cache::prepare_fork();  // its lock comes before every other
#endif
  g_init_lock.lock();
  for (std::size_t i = 0; i < g_arena_count.load(std::memory_order_relaxed); ++i) {
    published_arena(i)->lock.lock();
  }
  huge::lock_for_fork();
  base::lock_for_fork();
  ChunkRegistry::lock_for_fork();
  os::set_holding_locks_for_fork(true);
}

void after_fork_in_parent() RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  os::set_holding_locks_for_fork(false);
  ChunkRegistry::unlock_after_fork_in_parent();
  base::unlock_after_fork_in_parent();
  huge::unlock_after_fork_in_parent();
  for (std::size_t i = g_arena_count.load(std::memory_order_relaxed); i-- > 0;) {
    published_arena(i)->lock.unlock();
  }
  g_init_lock.unlock();
#if RUNSEL_THREAD_CACHE
  thread_cache::after_fork_in_parent();
#endif
}

// In the child every lock is still held (prepare_fork took them) until it is
// reset here: beyond what the analysis can follow, like prepare_fork.
void after_fork_in_child() RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  os::set_holding_locks_for_fork(false);
  ChunkRegistry::reset_after_fork_in_child();
  base::reset_after_fork_in_child();
  huge::reset_after_fork_in_child();
  for (std::size_t i = 0; i < g_arena_count.load(std::memory_order_relaxed); ++i) {
    published_arena(i)->lock.reset_in_child();
    g_arena_threads[i] = 0;  // only the forking thread lives on
  }
  if (t_arena != nullptr) g_arena_threads[t_arena->index()] = 1;
  g_init_lock.reset_in_child();
#if RUNSEL_THREAD_CACHE
  thread_cache::after_fork_in_child();
#endif
}

// pthread_atfork runs the prepare handlers in the reverse order of their
// registration: runsel's, which takes every lock, must be registered before
// any the program registers (from a constructor, before its first malloc),
// whose handlers may allocate. So runsel registers at load time, as jemalloc
// does (glibc's fork locks its malloc itself, after every handler);
// choose_arena registers too, for a process whose first
// malloc comes before the library's constructors run. The flag is set before
// the call: pthread_atfork may itself allocate.
void register_fork_handlers() {
  if (!g_fork_handlers_registered.exchange(true)) {
    pthread_atfork(prepare_fork, after_fork_in_parent, after_fork_in_child);
  }
}

// The first of this library's constructors.
[[gnu::constructor(101)]] void register_fork_handlers_at_load() { register_fork_handlers(); }

// The key's destructor, at a thread's exit: its arena has one thread fewer.
// The thread may still allocate in later destructors: t_arena stays set.
void detach_thread(void* arena) {
#if RUNSEL_THREAD_CACHE
  thread_cache::at_thread_exit();  // before the lock: it takes arena locks
#endif
  LockGuard guard(g_init_lock);
  unsigned& threads = g_arena_threads[static_cast<Arena*>(arena)->index()];
  if (threads > 0) --threads;
}

// The arena for a new thread: an arena no thread is attached to, lowest
// index first; else a new one while there are fewer than the limit; else
// the one with the fewest threads.
std::size_t least_loaded_arena() RUNSEL_REQUIRES(g_init_lock) {
  const std::size_t count = g_arena_count.load(std::memory_order_relaxed);
  std::size_t best = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (g_arena_threads[i] < g_arena_threads[best]) best = i;
  }
  if (count == 0 || (g_arena_threads[best] > 0 && count < g_arena_limit)) return count;
  return best;
}

// One line on stderr: `runsel: <setting>: ignoring "<text>" (<expected>)`. The
// bad value is ignored and the default stays (no allocation).
void complain(const char* setting, const char* text, std::size_t length, const char* expected) {
  message(setting, ": ignoring \"", TextSlice{text, length}, "\" (", expected, ")");
}

void complain_about_conf(const char* entry, std::size_t length) {
  complain("RUNSEL_CONF", entry, length,
           "keys: profile:as_built, purge:budget|deferred|decay, dirty_max_pages:N, "
           "deferred_allocations:N, "
           "decay_ms:N, total_dirty_max_pages:N, growth_dirty_share:N, spare_chunks:N, "
           "idle_dirty_chunks:N, huge_cache_mb:N, huge_cache_ms:N, run_pages:P/P/.../P (one run "
           "size in pages per size class; PxN: N regions in it)");
}

// A decimal number filling [text, text + length); false if it is not one.
bool parse_number(const char* text, std::size_t length, std::uint64_t* out) {
  if (length == 0 || length > 18) return false;
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < length; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  *out = value;
  return true;
}

// A positive number from the environment variable `name`, read by RUNSEL_CONF's
// parser: unset or empty gives the fallback; anything else that is not 1 to 18
// digits, or is 0, is reported (complain) and gives the fallback too.
std::size_t env_count(const char* name, std::size_t fallback, const char* expected) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  std::uint64_t value = 0;
  const std::size_t length = std::strlen(text);
  if (!parse_number(text, length, &value) || value == 0) {
    complain(name, text, length, expected);
    return fallback;
  }
  return value;
}

// run_pages:P/P/.../P: every size class's run size in pages, in class order (the
// layout another allocator uses, e.g. an installed Firefox's, read from its bin
// statistics). Each class then holds as many regions as fit after its header; an
// entry PxN holds N regions instead (that allocator's count, whose header is
// larger), refused if N do not fit. All or nothing: a wrong count, or a class
// with fewer than 2 regions, changes no class.
bool parse_run_pages(const char* text, std::size_t length) {
  std::array<BinInfo, kNumBins> geometry{};
  std::size_t index = 0;
  for (std::size_t at = 0; at <= length; ++index) {
    const char* slash = static_cast<const char*>(std::memchr(text + at, '/', length - at));
    const std::size_t end = slash ? static_cast<std::size_t>(slash - text) : length;
    const char* times = static_cast<const char*>(std::memchr(text + at, 'x', end - at));
    const std::size_t pages_end = times ? static_cast<std::size_t>(times - text) : end;
    std::uint64_t pages = 0, regions = ~std::uint64_t{0};
    if (index >= kNumBins || !parse_number(text + at, pages_end - at, &pages) || pages == 0 ||
        pages > kMaxSmallRunPages)
      return false;
    if (times != nullptr && !parse_number(times + 1, end - pages_end - 1, &regions)) return false;
    geometry[index] = bin_info_for_pages(index, pages, regions);
    if (geometry[index].nregs < 2) return false;
    if (times != nullptr && geometry[index].nregs != regions) return false;
    at = end + 1;
  }
  if (index != kNumBins) return false;
  g_bin_geometry = geometry;
  return true;
}

// profile:as_built: mozjemalloc's page level as it purges, keeps chunks and
// recycles runs (purge.h, PurgeSettings::as_built_lifecycle): purge at once
// down to half the budget, one spare chunk, no process-wide budget or growth
// purge (one budget per arena), no huge mapping cache (mozjemalloc purges
// the huge chunks it recycles). Later RUNSEL_CONF entries override these.
bool apply_profile(const char* value, std::size_t length, PurgeSettings* settings)
    RUNSEL_REQUIRES(g_init_lock) {
  constexpr const char kAsBuilt[] = "as_built";
  if (length != sizeof(kAsBuilt) - 1 || std::memcmp(value, kAsBuilt, length) != 0) return false;
  settings->as_built_lifecycle = true;
  settings->policy = PurgePolicy::kBudget;
  settings->spare_chunks = 1;
  settings->total_budget_pages = 0;
  settings->growth_dirty_share = 0;
  g_huge_cache.max_bytes = 0;
  return true;
}

// Applies one "key:value" entry of RUNSEL_CONF; false if it is not valid.
bool apply_conf_entry(const char* entry, std::size_t length, PurgeSettings* settings)
    RUNSEL_REQUIRES(g_init_lock) {
  const char* colon = static_cast<const char*>(std::memchr(entry, ':', length));
  if (colon == nullptr) return false;
  const std::size_t key_length = static_cast<std::size_t>(colon - entry);
  const char* value = colon + 1;
  const std::size_t value_length = length - key_length - 1;
  auto key_is = [&](const char* key) {
    return std::strlen(key) == key_length && std::memcmp(key, entry, key_length) == 0;
  };
  std::uint64_t number = 0;
  if (key_is("purge")) return parse_purge_policy(value, value_length, &settings->policy);
  if (key_is("profile")) return apply_profile(value, value_length, settings);
  if (key_is("run_pages")) return parse_run_pages(value, value_length);
  if (!parse_number(value, value_length, &number)) return false;
  if (key_is("dirty_max_pages") && number > 0) {
    settings->budget_pages = number;
  } else if (key_is("deferred_allocations")) {
    settings->deferred_allocations = number;
  } else if (key_is("decay_ms") && number > 0) {
    settings->decay_window_ns = number * 1'000'000;
  } else if (key_is("total_dirty_max_pages")) {
    settings->total_budget_pages = number;
  } else if (key_is("spare_chunks")) {
    settings->spare_chunks = number;
  } else if (key_is("idle_dirty_chunks")) {
    settings->idle_dirty_chunks = number;
  } else if (key_is("growth_dirty_share")) {
    settings->growth_dirty_share = number;
  } else if (key_is("huge_cache_mb")) {
    g_huge_cache.max_bytes = number << 20;
  } else if (key_is("huge_cache_ms")) {
    g_huge_cache.max_age_ns = number * 1'000'000;
  } else {
    return false;
  }
  return true;
}

// RUNSEL_CONF="purge:decay,decay_ms:5000": comma-separated key:value entries,
// read once (no allocation). A bad entry is reported on stderr and ignored.
void read_conf(PurgeSettings* settings) RUNSEL_REQUIRES(g_init_lock) {
  settings->budget_pages = env_count(
      "RUNSEL_DIRTY_MAX_PAGES", settings->budget_pages,
      "a number of pages from 1 to 999999999999999999, as RUNSEL_CONF's dirty_max_pages:N");
  const char* text = getenv("RUNSEL_CONF");
  if (text == nullptr) return;
  while (*text != '\0') {
    const char* end = std::strchr(text, ',');
    const std::size_t length = end ? static_cast<std::size_t>(end - text) : std::strlen(text);
    if (length > 0 && !apply_conf_entry(text, length, settings)) complain_about_conf(text, length);
    text += length;
    if (*text == ',') ++text;
  }
}

void initialise_locked() RUNSEL_REQUIRES(g_init_lock) {
  if (g_arena_limit != 0) return;
  std::size_t limit = kArenasPerCpu * std::size_t{os::cpu_count()};
  limit = env_count("RUNSEL_ARENAS", limit,
                    "a number of arenas from 1 to 999999999999999999; above 64 means 64");
  static_assert(kMaxArenas == 64, "the message above names the cap");
  if (limit < 1) limit = 1;  // os::cpu_count() may not know
  if (limit > kMaxArenas) limit = kMaxArenas;
  read_conf(&g_purge_settings);
  huge::configure(g_huge_cache);
  g_arena_limit = limit;
}

}  // namespace

constinit thread_local Arena* t_arena = nullptr;

__attribute__((noinline)) Arena* choose_arena() {
  Arena* arena;
  bool keyed;  // the detach key exists (read under the lock)
  {
    LockGuard guard(g_init_lock);
    initialise_locked();
    const std::size_t index = least_loaded_arena();
    if (g_arenas[index] == nullptr) {
      g_arenas[index] = Arena::create(static_cast<unsigned>(index), g_purge_settings);
      if (g_arenas[index] == nullptr) return nullptr;
      // Publish arenas in index order so readers can walk 0..count-1.
      std::size_t count = g_arena_count.load(std::memory_order_relaxed);
      while (count < kMaxArenas && g_arenas[count] != nullptr) ++count;
      g_arena_count.store(count, std::memory_order_release);
      if (count > 1 && !g_several_arenas.load(std::memory_order_relaxed)) {
        // From now on every arena keeps the process-wide dirty total up to
        // date as its pages change; the ones that exist add what they hold
        // now (an arena whose thread is idle would not before it next
        // changed). The init lock comes before the arenas' locks.
        g_several_arenas.store(true, std::memory_order_relaxed);
        for (std::size_t i = 0; i < count; ++i) {
          if (i == index) continue;
          LockGuard arena_guard(g_arenas[i]->lock);
          g_arenas[i]->publish_dirty();
        }
      }
    }
    arena = g_arenas[index];
    ++g_arena_threads[index];
    if (!g_detach_key_created) {
      g_detach_key_created = pthread_key_create(&g_detach_key, detach_thread) == 0;
    }
    keyed = g_detach_key_created;
  }
  t_arena = arena;
  // After t_arena is set: should glibc allocate for the key, that finds the arena.
  if (keyed) pthread_setspecific(g_detach_key, arena);
  register_fork_handlers();  // when the load-time registration did not run
  return arena;
}

PurgePolicy purge_policy() {
  LockGuard guard(g_init_lock);
  initialise_locked();
  return g_purge_settings.policy;
}

bool as_built_profile() {
  LockGuard guard(g_init_lock);
  initialise_locked();
  return g_purge_settings.as_built_lifecycle;
}

std::size_t arena_count() { return g_arena_count.load(std::memory_order_acquire); }

Arena* arena_at(std::size_t index) {
  return index < arena_count() ? published_arena(index) : nullptr;
}

}  // namespace runsel
