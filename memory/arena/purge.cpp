// The arena's side of the purge policy (purge.h): weighing its dirty pages
// against the budget and purging them. The policies' names and the decay
// schedule, which need no arena: purge_policy.cpp.
#include "arena/purge.h"

#include <atomic>

#include "arena/arena.h"
#include "platform/os.h"

namespace runsel {

// The dirty pages the policy weighs and the budget it weighs them against:
// the process's and the process-wide budget when there is one (the arena's
// own purge then takes its share of the excess), else the arena's own.
bool Arena::process_budget_applies() const {
  return purge_.total_budget_pages != 0 && g_several_arenas.load(std::memory_order_relaxed);
}

std::size_t Arena::weighed_dirty() const {
  return process_budget_applies() ? g_process_dirty_pages.load(std::memory_order_relaxed)
                                  : dirty_pages_;
}

std::size_t Arena::weighed_budget() const {
  return process_budget_applies() ? purge_.total_budget_pages : budget_pages_;
}

// Purges until the weighed dirty pages are down to half the weighed budget,
// as far as this arena's own pages go.
void Arena::purge_to_half_budget() {
  const std::size_t weighed = weighed_dirty(), target = weighed_budget() / 2;
  if (weighed <= target) return;
  const std::size_t excess = weighed - target;
  purge_down_to(dirty_pages_ > excess ? dirty_pages_ - excess : 0);
}

// The bound was crossed: purge_to_half_budget(), and under the process-wide
// budget, the other arenas' pages when this arena's own were not enough.
void Arena::purge_at_bound() {
  purge_to_half_budget();
  if (process_budget_applies()) purge_peers_to(weighed_budget() / 2);
}

// Purges other arenas' dirty pages while the process holds more than
// `target`. An arena that stopped allocating (its thread waits, or exited)
// never weighs the total again, so the one that crossed the budget purges
// for it. Only arenas whose lock is free now: this thread holds its own
// arena's lock, and waiting for a second could deadlock. A busy arena is in
// a call that weighs the total itself before it returns.
void Arena::purge_peers_to(std::size_t target) {
  for (Arena* peer = newest_.load(std::memory_order_acquire); peer != nullptr;
       peer = peer->next_arena_) {
    const std::size_t total = g_process_dirty_pages.load(std::memory_order_relaxed);
    if (total <= target) return;
    if (peer == this || !peer->lock.try_lock()) continue;
    const std::size_t excess = total - target;
    peer->purge_down_to(peer->dirty_pages_ > excess ? peer->dirty_pages_ - excess : 0);
    peer->lock.unlock();
  }
}

void Arena::weigh_dirty_pages() {
  switch (purge_.policy) {
    case PurgePolicy::kBudget:
      if (weighed_dirty() > weighed_budget()) purge_at_bound();
      return;
    case PurgePolicy::kDeferred: {
      const std::size_t weighed = weighed_dirty(), budget = weighed_budget();
      if (weighed <= budget) return;
      // Above the hard bound the purge runs now: kDeferredHardFactor times an
      // arena's own budget, or twice the process-wide one.
      const std::size_t hard = process_budget_applies() ? 2 * budget : budget * kDeferredHardFactor;
      if (weighed > hard) {
        purge_at_bound();
        purge_queued_ = false;
      } else if (!purge_queued_) {
        purge_queued_ = true;
        allocations_until_purge_ = purge_.deferred_allocations;
      }
      return;
    }
    case PurgePolicy::kDecay: {
      const std::uint64_t now = os::monotonic_ns();
      if (decay_.due(now)) run_decay_step(now);
      // The process-wide budget bounds what decay keeps across arenas.
      if (process_budget_applies() && weighed_dirty() > weighed_budget()) purge_at_bound();
      return;
    }
  }
}

void Arena::before_page_allocation_slow() {
  if (purge_.policy == PurgePolicy::kDeferred) {
    if (!purge_queued_ || allocations_until_purge_-- > 0) return;
    purge_queued_ = false;
    if (weighed_dirty() > weighed_budget()) purge_to_half_budget();
  } else if (purge_.policy == PurgePolicy::kDecay) {
    const std::uint64_t now = os::monotonic_ns();
    if (decay_.due(now)) run_decay_step(now);
  }
}

// The arena grows while it holds dirty pages its new pages could not come
// from: pages of other size classes (class tags, chunk.h), or stretches too
// short. Give back as many of them as it committed, so that its committed
// pages grow by the new ones less what it purged, but keep
// 1/growth_dirty_share of its committed pages dirty for its classes to come
// back to. The fresh pages are counted until there are kGrowthPurgeBatch of
// them and purged for in one go: a run at a time would be an madvise (and a
// TLB shootdown across the process's threads) for every new run, taken under
// the arena's lock. Purged from the top of the highest chunks down
// (purge_down_to), so possibly pages of the class that grows; its new run is
// allocated already.
void Arena::purge_for_growth(std::size_t fresh_pages) {
  if (purge_.growth_dirty_share == 0 || !process_budget_applies()) return;
  growth_pending_ += fresh_pages;
  if (growth_pending_ < kGrowthPurgeBatch) return;
  const std::size_t grown = growth_pending_;
  growth_pending_ = 0;
  const std::size_t floor = committed_pages_ / purge_.growth_dirty_share;
  if (dirty_pages_ <= floor) return;
  const std::size_t excess = dirty_pages_ - floor;
  purge_down_to(dirty_pages_ - (excess < grown ? excess : grown));
}

void Arena::run_decay_step(std::uint64_t now) {
  const std::size_t allowed = decay_.advance(now, dirty_pages_, purge_.decay_window_ns);
  if (dirty_pages_ > allowed) purge_down_to(allowed);
}

std::size_t Arena::purge_due() {
  const std::size_t before = dirty_pages_;
  switch (purge_.policy) {
    case PurgePolicy::kBudget:
      break;
    case PurgePolicy::kDeferred:
      if (purge_queued_ && weighed_dirty() > weighed_budget()) purge_to_half_budget();
      purge_queued_ = false;
      break;
    case PurgePolicy::kDecay:
      run_decay_step(os::monotonic_ns());
      break;
  }
  return before - dirty_pages_;
}

void Arena::scale_budget(std::size_t percent) {
  const std::size_t pages = purge_.budget_pages * percent / 100;
  budget_pages_ = pages > 0 ? pages : 1;
}

// Purges dirty free pages until at most `target_pages` remain, from the
// highest-addressed dirty chunk down and from the top of each chunk down:
// best-fit allocation reuses low addresses first, so high pages are the ones
// least likely to be faulted straight back in. Purged pages read as zero and
// stop being committed.
void Arena::purge_down_to(std::size_t target_pages) {
  while (dirty_pages_ > target_pages && !dirty_chunks_.empty()) {
    Chunk* chunk = dirty_chunks_.front();
    for (Chunk* c = DirtyList::next(chunk); c != nullptr; c = DirtyList::next(c)) {
      if (c > chunk) chunk = c;
    }
    purges_ += purge_chunk(chunk, target_pages);
  }
}

// Purges `chunk`'s dirty pages from the top down while the arena has more
// than `target_pages` dirty; returns the madvise calls it made.
std::size_t Arena::purge_chunk(Chunk* chunk, std::size_t target_pages) {
  std::size_t calls = 0;
  for (std::size_t i = kPagesPerChunk; i > kFirstUsablePage && dirty_pages_ > target_pages;) {
    const PageMapEntry& top = chunk->map[i - 1];
    if (top.allocated() || !top.dirty()) {
      --i;
      continue;
    }
    // [begin, i) is a stretch of free dirty pages, no longer than needed.
    std::size_t begin = i;
    while (begin > kFirstUsablePage && !chunk->map[begin - 1].allocated() &&
           chunk->map[begin - 1].dirty() && dirty_pages_ - (i - begin) > target_pages) {
      --begin;
      chunk->map[begin].bits &= ~std::uintptr_t{kDirty};
    }
    const std::size_t count = i - begin;
    os::purge(chunk->page_address(begin), count << kPageShift);
    ++calls;
    chunk->ndirty -= count;
    remove_dirty(count);
    committed_pages_ -= count;
    i = begin;
  }
  if (chunk->ndirty == 0 && chunk->in_dirty_list) unlink_dirty(chunk);
  return calls;
}

}  // namespace runsel
