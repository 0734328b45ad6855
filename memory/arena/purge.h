// Purge policies: when an arena gives its dirty pages back to the kernel.
// The arena owns the mechanism (purge_down_to); this file owns the decision.
//   budget    purge down to half the budget as soon as a free crosses it.
//   deferred  the free that crosses the budget only queues a request; the
//             purge runs from the `deferred_allocations`-th page allocation
//             (a new run or a large allocation) after it, or when the program
//             calls runsel_purge_now() (in its idle time). The delay counts
//             allocations, not time, so a run stays deterministic. Above
//             kDeferredHardFactor × budget it purges at once, so a program
//             that never allocates again stays bounded.
//   decay     dirty pages are purged smoothly: pages dirtied `age` ago may
//             stay in proportion (window − age) ÷ window, checked in epochs of
//             window ÷ kSteps from page allocations, frees and runsel_purge_now.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace runsel {

enum class PurgePolicy : std::uint8_t { kBudget, kDeferred, kDecay };

#if !defined(RUNSEL_PURGE_POLICY)
#define RUNSEL_PURGE_POLICY kDeferred
#endif
// The build's default (meson -Dpurge_policy); RUNSEL_CONF overrides it.
inline constexpr PurgePolicy kDefaultPurgePolicy = PurgePolicy::RUNSEL_PURGE_POLICY;

struct PurgeSettings {
  PurgePolicy policy = kDefaultPurgePolicy;
  std::size_t budget_pages = 256;  // mozjemalloc's 1 MiB per arena
  std::size_t deferred_allocations = 1024;
  std::uint64_t decay_window_ns = 10'000'000'000ULL;  // 10 s, as jemalloc
  // The process-wide budget (0: none). Once the process has more than one
  // arena:
  // - `budget` and `deferred` weigh the dirty pages of all arenas together
  //   against it, instead of each arena's own against budget_pages
  //   (`deferred` purges at once above twice it).
  // - An arena's purge takes the excess over half of it from its own pages.
  // - Idle chunks keep their dirty pages for the policy.
  // - `decay` keeps its schedule and purges the same way when the total
  //   crosses it.
  // A process with one arena is unchanged.
  // 48 MiB: measured against 8 to 64 MiB on the threaded bench programs and
  // the threads workload. It is the least that keeps what a phase drains for
  // the next, while 8 arenas could keep 128 MiB before. Peak RSS and minor
  // faults against glibc's:
  // - stress: 8 MiB 0.75x and 5.8x, 32 MiB 1.05x and 2.3x, 48 MiB 1.19x and
  //   1.5x, 64 MiB 1.29x and 1.2x.
  // - threads: 32 MiB 0.82x and 2.4x, 48 MiB 0.97x and 2.0x.
  std::size_t total_budget_pages = 48 * 256;
  // The growth purge (0: none), while the process-wide budget applies. An
  // arena that commits fresh pages purges as many of its own dirty pages,
  // down to 1/growth_dirty_share of its committed pages. Fresh pages: a new
  // run or large allocation that none of its dirty pages could serve (they
  // belong to other size classes, or lie in stretches too short). Each arena
  // keeps its own classes' dirty pages, which the process-wide budget leaves
  // alone until the total crosses it, after the peak if ever.
  // 8: over several runs, producer_consumer's peak RSS against glibc's, and
  // stress's minor faults against glibc's (experiments/bench/README.md,
  // 2026-11-27):
  // - Without it: 1.27x to 1.31x, and 0.8x to 1.1x.
  // - 16: 1.18x to 1.20x, and 1.4x to 2.2x (purged pages are faulted back
  //   when their class returns).
  // - 12: 1.20x to 1.22x, and 1.3x to 1.9x.
  // - 8: 1.23x to 1.25x, and 1.0x to 1.5x.
  std::size_t growth_dirty_share = 8;
  // Spare chunks an arena keeps (chunks whose pages are all free).
  std::size_t spare_chunks = 8;
  // Idle chunks (nothing allocated, class tags kept) an arena lets keep their
  // dirty pages for the policy while no process-wide budget applies; an
  // older one is purged when another empties.
  std::size_t idle_dirty_chunks = 1;
  // mozjemalloc's run lifecycle (RUNSEL_CONF profile:as_built; memory/README.md,
  // "The as-built profile"):
  // - An emptied small run goes back to the arena at once (no kept run).
  // - Free pages carry no class tag, so every free run coalesces with its free
  //   neighbours and a new run takes the lowest best fit among them all.
  // - A chunk that empties becomes the spare and the older spare goes.
  // It checks less: a double free of a region whose run was given back reaches
  // whatever reuses the address.
  bool as_built_lifecycle = false;
};

// The dirty pages of every arena together (arenas add and remove theirs
// under their own lock; relaxed: a bound, not an invariant).
inline constinit std::atomic<std::size_t> g_process_dirty_pages{0};
// Set when the process's second arena is created: from then on the
// process-wide budget applies (PurgeSettings::total_budget_pages).
inline constinit std::atomic<bool> g_several_arenas{false};

inline constexpr std::size_t kDeferredHardFactor = 16;

const char* purge_policy_name(PurgePolicy policy);
// Parses "budget", "deferred" or "decay" (`length` bytes); false otherwise.
bool parse_purge_policy(const char* text, std::size_t length, PurgePolicy* out);

// The decay schedule: how many dirty pages may remain now. The pages that
// became dirty in one epoch are remembered as one count, for kSteps epochs.
class DirtyDecay {
 public:
  static constexpr std::size_t kSteps = 50;

  // Counts pages that just became dirty.
  void dirtied(std::size_t pages) { dirtied_now_ += pages; }
  // Whether `now` is past the current epoch (a cheap check for hot callers).
  bool due(std::uint64_t now) const { return now >= next_epoch_; }
  // Closes the epochs that ended by `now` and returns how many of the arena's
  // `dirty` pages may remain.
  std::size_t advance(std::uint64_t now, std::size_t dirty, std::uint64_t window_ns);

 private:
  std::uint64_t next_epoch_ = 0;
  std::size_t dirtied_now_ = 0;       // pages dirtied in the current epoch
  std::size_t newest_ = 0;            // index of the newest epoch in dirtied_
  std::size_t dirtied_[kSteps] = {};  // pages newly dirty per epoch
};

}  // namespace runsel
