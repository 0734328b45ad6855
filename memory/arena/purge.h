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
};

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
