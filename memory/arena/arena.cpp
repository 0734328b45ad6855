// Page-level arena work: chunks, best-fit page runs with split and coalesce,
// large allocations and spare chunks (the purge policy's arena side: purge.cpp).
#include "arena/arena.h"

#include <atomic>
#include <bit>
#include <cstring>
#include <new>

#include "arena/base.h"
#include "arena/freed_key.h"
#include "platform/os.h"
#include "structures/chunk_registry.h"

namespace runsel {

constinit std::uintptr_t g_link_key = 0;

// Every ordinary variant takes the same metadata for an arena (8 KiB),
// whatever its container adds to each bin: containers that make the same
// choices must have the same heap to the byte, bookkeeping included. (A
// counting library's bins are bigger.)
inline constexpr std::size_t kArenaMetadataBytes =
    sizeof(Arena) <= 8192 ? 8192 : std::bit_ceil(sizeof(Arena));

// Nothing else can see the arena yet: no lock to hold.
Arena* Arena::create(unsigned index,
                     const PurgeSettings& settings) RUNSEL_NO_THREAD_SAFETY_ANALYSIS {
  void* memory = base::allocate(kArenaMetadataBytes);
  if (memory == nullptr) return nullptr;
  // Under the frontend's init lock, before any region can be freed.
  while (g_link_key == 0) g_link_key = os::random_word();
  Arena* arena = new (memory) Arena();
  arena->index_ = index;
  arena->run_key_ = RunKey::from(os::random_word() ^ reinterpret_cast<std::uintptr_t>(arena));
  arena->purge_ = settings;
  arena->budget_pages_ = settings.budget_pages;
  for (std::size_t i = 0; i < kNumBins; ++i) {
    arena->bins_[i].info = &bin_info(i);
    Bin& bin = arena->bins_[i];
    arena->tagged_classes_[i] = {&bin, bin_info(i).reciprocal, bin_info(i).reg0_offset,
                                 static_cast<std::uint32_t>(bin_info(i).reciprocal)};
    bin.check_factor = reinterpret_cast<std::uintptr_t>(&bin) ^ arena->run_key_.key;
    bin.check_rotated = arena->run_key_.rotated;
  }
  // Created under the frontend's init lock, so one writer at a time.
  arena->next_arena_ = newest_.load(std::memory_order_relaxed);
  newest_.store(arena, std::memory_order_release);
  return arena;
}

// ---- chunks ---------------------------------------------------------------

// Only on chunk creation and huge frees: the key is derived each time (no
// static to guard, which would pull in the C++ runtime).
std::uint64_t Chunk::canary_for(const void* address) {
  const std::uint64_t key = keyed_mix(os::random_word(), 0x63616e617279, 0);
  return keyed_mix(reinterpret_cast<std::uintptr_t>(address), 0, key);
}

bool chunk_canary_intact(const void* address) {
  const ChunkOwner owner = ChunkRegistry::lookup(address);
  if (!owner.is_arena_chunk()) return true;
  Arena* arena = owner.as<Arena>();
  LockGuard guard(arena->lock);
  // Still that arena's chunk, so still mapped: chunks leave the registry,
  // under their arena's lock, before they are unmapped.
  if (ChunkRegistry::lookup(address).word() != owner.word()) return true;
  return static_cast<const Chunk*>(address)->canary == Chunk::canary_for(address);
}

Chunk* Arena::new_chunk() {
  if (Chunk* chunk = spares_.front()) {
    unlink_spare(chunk);
    insert_free_run(&chunk->map[kFirstUsablePage]);
    return chunk;
  }
  void* memory = os::map_aligned(kChunkSize, kChunkSize);
  if (memory == nullptr) return nullptr;
  Chunk* chunk = static_cast<Chunk*>(memory);  // fresh mapping: all zero
  chunk->canary = Chunk::canary_for(chunk);
  if (!ChunkRegistry::set_range(chunk, kChunkSize, ChunkOwner::arena_chunk(this))) {
    ChunkRegistry::set_range(chunk, kChunkSize, ChunkOwner::none());
    os::unmap(memory, kChunkSize);
    return nullptr;
  }
  for (std::size_t i = 0; i < kFirstUsablePage; ++i) chunk->map[i].bits = kAllocated | kReserved;
  os::protect_none(chunk->page_address(kChunkHeaderPages), kGuardPages * kPageSize);
  set_free_run(chunk, kFirstUsablePage, kUsablePages);

  chunks_.push_front(chunk);
  ++chunk_count_;
  committed_pages_ += kChunkHeaderPages;
  insert_free_run(&chunk->map[kFirstUsablePage]);
  return chunk;
}

// A chunk whose usable pages are all free: keep it as a spare (its dirty
// pages stay counted, and purgeable by the policy) unless there are enough.
// The as-built profile keeps the newest, as mozjemalloc's one spare is the
// chunk that emptied last: the oldest spare goes instead.
void Arena::retire_chunk(Chunk* chunk) {
  if (purge_.as_built_lifecycle && spare_count_ != 0 && spare_count_ >= purge_.spare_chunks) {
    Chunk* oldest = spares_.front();
    while (SpareList::next(oldest) != nullptr) oldest = SpareList::next(oldest);
    unlink_spare(oldest);
    destroy_chunk(oldest);
  }
  if (spare_count_ >= purge_.spare_chunks) {
    destroy_chunk(chunk);
    return;
  }
  chunk->spare = true;
  spares_.push_front(chunk);
  ++spare_count_;
}

void Arena::unlink_spare(Chunk* chunk) {
  spares_.erase(chunk);
  chunk->spare = false;
  --spare_count_;
}

void Arena::release_cached_large_runs() {
  large_cache_.drain([this](void* run, std::size_t pages) {
    lock.assert_held();
    Chunk* chunk = Chunk::of(run);
    release_large_run(chunk, chunk->page_index(run), pages << kPageShift);
  });
}

void Arena::purge_all() {
  take_remote_frees();
  release_cached_large_runs();
  release_empty_runs();
  purge_down_to(0);
  release_clean_spares();
}

void Arena::release_clean_spares() {
  if (spare_count_ <= 1) return;
  for (Chunk* chunk = spares_.front(); chunk != nullptr && spare_count_ > 1;) {
    Chunk* next = SpareList::next(chunk);
    if (chunk->ndirty == 0) {
      unlink_spare(chunk);
      destroy_chunk(chunk);
    }
    chunk = next;
  }
}

void Arena::destroy_chunk(Chunk* chunk) {
  if (chunk->in_dirty_list) unlink_dirty(chunk);
  remove_dirty(chunk->ndirty);
  committed_pages_ -= kChunkHeaderPages + chunk->ndirty;
  chunks_.erase(chunk);
  --chunk_count_;
  // No container link check may take it for mapped once it is unmapped.
  for (Bin& bin : bins_) {
    if (bin.linked_chunk == reinterpret_cast<std::uintptr_t>(chunk)) bin.linked_chunk = 0;
  }
  ChunkRegistry::set_range(chunk, kChunkSize, ChunkOwner::none());
  os::unmap(chunk, kChunkSize);
}

void Arena::link_dirty(Chunk* chunk) {
  chunk->in_dirty_list = true;
  dirty_chunks_.push_back(chunk);
}

void Arena::unlink_dirty(Chunk* chunk) {
  chunk->in_dirty_list = false;
  dirty_chunks_.erase(chunk);
}

// ---- page runs ------------------------------------------------------------

static_assert(class_tag_of_bin(kNumBins - 1) <= kClassTagMask, "class tags fit their bits");

// What a free page keeps when it stops being a run boundary.
inline constexpr std::uintptr_t kFreePageState = kDirty | kClassTagMask;

void Arena::set_free_run(Chunk* chunk, std::size_t first, std::size_t pages) {
  const std::uintptr_t size = pages << kPageShift;
  PageMapEntry& head = chunk->map[first];
  PageMapEntry& tail = chunk->map[first + pages - 1];
  head.bits = (head.bits & kFreePageState) | size;
  tail.bits = (tail.bits & kFreePageState) | size;
}

void Arena::carve(Chunk* chunk, std::size_t first, std::size_t run_pages, std::size_t pages) {
  RUNSEL_ASSERT(pages != 0 && pages <= run_pages && chunk->map[first].size_pages() == run_pages);
  if (run_pages > pages) {
    // The old head's size field must go: it is no longer a run boundary.
    set_free_run(chunk, first + pages, run_pages - pages);
    insert_free_run(&chunk->map[first + pages]);
  }
}

void Arena::mark_allocated(Chunk* chunk, std::size_t first, std::size_t pages,
                           std::uintptr_t head_bits, std::uintptr_t tail_bits, bool zero) {
  std::size_t was_dirty = 0;
  for (std::size_t i = first; i < first + pages; ++i) {
    if (chunk->map[i].bits & kDirty) {
      ++was_dirty;
      if (zero) std::memset(chunk->page_address(i), 0, kPageSize);
    }
    chunk->map[i].bits = i == first ? head_bits : tail_bits;
  }
  chunk->ndirty -= was_dirty;
  chunk->allocated_pages += pages;
  if (chunk->idle) {
    chunk->idle = false;
    --idle_chunks_;
  }
  remove_dirty(was_dirty);
  committed_pages_ += pages - was_dirty;
  if (chunk->ndirty == 0 && chunk->in_dirty_list) unlink_dirty(chunk);
  after_pages_committed(pages - was_dirty);
}

PageMapEntry* Arena::best_fit(std::size_t pages, std::uintptr_t class_tag) const {
  const std::size_t wanted = pages << kPageShift;
  return free_runs_[class_tag >> kClassTagShift].first_not_below(
      [wanted](const PageMapEntry* e) { return e->size_bytes() < wanted; });
}

char* Arena::allocate_pages(std::size_t pages, std::uintptr_t class_tag, std::uintptr_t head_bits,
                            std::uintptr_t tail_bits, bool zero) {
  before_page_allocation();
  PageMapEntry* entry = class_tag != 0 ? best_fit(pages, class_tag) : nullptr;
  if (entry == nullptr) entry = best_fit(pages, 0);
  if (entry == nullptr) {
    if (new_chunk() == nullptr) return nullptr;
    entry = best_fit(pages, 0);
  }
  Chunk* chunk = Chunk::of(entry);
  const std::size_t first = chunk->index_of(entry);
  const std::size_t run_pages = entry->size_pages();
  erase_free_run(entry);
  carve(chunk, first, run_pages, pages);
  char* run = chunk->page_address(first);
  if ((head_bits & kLarge) == 0) {  // small run: every page names the run header
    head_bits |= reinterpret_cast<std::uintptr_t>(run);
    tail_bits |= reinterpret_cast<std::uintptr_t>(run);
  }
  mark_allocated(chunk, first, pages, head_bits, tail_bits, zero);
  return run;
}

void Arena::free_pages(Chunk* chunk, std::size_t first, std::size_t pages,
                       std::uintptr_t class_tag) {
  chunk->allocated_pages -= pages;
  for (std::size_t i = first; i < first + pages; ++i) chunk->map[i].bits = kDirty | class_tag;
  chunk->ndirty += pages;
  add_dirty(pages);
  decay_.dirtied(pages);
  if (!chunk->in_dirty_list) link_dirty(chunk);

  // Coalesce with free neighbours of the same class tag; their old boundary
  // entries lose their size.
  const auto joins = [class_tag](const PageMapEntry& e) {
    return !e.allocated() && e.class_tag() == class_tag;
  };
  if (first > kFirstUsablePage && joins(chunk->map[first - 1])) {
    PageMapEntry& prev_tail = chunk->map[first - 1];
    std::size_t prev_pages = prev_tail.size_pages();
    std::size_t prev_first = first - prev_pages;
    erase_free_run(&chunk->map[prev_first]);
    prev_tail.bits &= kFreePageState;
    chunk->map[prev_first].bits &= kFreePageState;
    first = prev_first;
    pages += prev_pages;
  }
  const std::size_t next = first + pages;
  if (next < kPagesPerChunk && joins(chunk->map[next])) {
    PageMapEntry& next_head = chunk->map[next];
    std::size_t next_pages = next_head.size_pages();
    erase_free_run(&next_head);
    next_head.bits &= kFreePageState;
    chunk->map[next + next_pages - 1].bits &= kFreePageState;
    pages += next_pages;
  }
  set_free_run(chunk, first, pages);

  // Only an untagged chunk may be unmapped: a tagged one keeps its tags.
  if (pages == kUsablePages && class_tag == 0) {
    retire_chunk(chunk);
  } else {
    insert_free_run(&chunk->map[first]);
    if (chunk->allocated_pages == 0) idle_tagged_chunk(chunk);
  }
  after_pages_dirtied();
}

// A chunk with nothing allocated that keeps class tags, so stays mapped (in
// place of being a spare or unmapped): an idle chunk. While the process-wide
// budget applies (purge.h), its dirty pages wait for the policy like any, and
// that budget bounds them across arenas. Otherwise only the most recently
// emptied ones (purge_.idle_dirty_chunks) keep their dirty pages for the
// purge policy. When another empties, the idle chunk that has had dirty pages
// longest (the dirty list is oldest first) is purged at once. Unmapping would
// have given those pages back too, so, like an unmapping, this is not counted
// as a purge of the policy.
void Arena::idle_tagged_chunk(Chunk* chunk) {
  chunk->idle = true;
  ++idle_chunks_;
  if (idle_chunks_ <= purge_.idle_dirty_chunks || process_budget_applies()) return;
  for (Chunk* c = dirty_chunks_.front(); c != nullptr; c = DirtyList::next(c)) {
    if (c->idle && c != chunk) {
      purge_chunk(c, dirty_pages_ - c->ndirty);
      return;
    }
  }
}

// ---- large allocations ----------------------------------------------------

void* Arena::malloc_large(std::size_t size, bool zero) {
  RUNSEL_ASSERT(size != 0 && size % kPageSize == 0 && size <= kMaxLargeSize);
  const std::size_t pages = size >> kPageShift;
  LockGuard guard(lock);
  take_remote_frees();
  if constexpr (kLargeRunCache) {
    // Still a large allocation of this size to the page map and the stats.
    if (void* cached = large_cache_.pop(pages)) {
      ++large_nmalloc_;
      if (zero) std::memset(cached, 0, size);
      return cached;
    }
  }
  char* run = allocate_pages(pages, 0, size | kAllocated | kLarge, kAllocated | kLarge, zero);
  if (run == nullptr) return nullptr;
  large_allocated_ += size;
  ++large_nmalloc_;
  return run;
}

void* Arena::malloc_large_aligned(std::size_t size, std::size_t alignment) {
  RUNSEL_ASSERT(alignment > kPageSize && (alignment & (alignment - 1)) == 0);
  const std::size_t pages = size >> kPageShift;
  const std::size_t total = pages + (alignment >> kPageShift) - 1;
  LockGuard guard(lock);
  char* run = allocate_pages(total, 0, (total << kPageShift) | kAllocated | kLarge,
                             kAllocated | kLarge, false);
  if (run == nullptr) return nullptr;
  Chunk* chunk = Chunk::of(run);
  const std::size_t first = chunk->page_index(run);
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(run);
  const std::size_t lead = (((address + alignment - 1) & ~(alignment - 1)) - address) >> kPageShift;
  const std::size_t trail = total - lead - pages;
  chunk->map[first + lead].bits = size | kAllocated | kLarge;
  if (lead != 0) free_pages(chunk, first, lead);
  if (trail != 0) free_pages(chunk, first + lead + pages, trail);
  large_allocated_ += size;
  ++large_nmalloc_;
  return chunk->page_address(first + lead);
}

bool Arena::resize_large_in_place(Chunk* chunk, void* p, std::size_t old_size,
                                  std::size_t new_size) {
  const std::size_t old_pages = old_size >> kPageShift, new_pages = new_size >> kPageShift;
  LockGuard guard(lock);
  const std::size_t first = chunk->page_index(p);
  if (new_pages < old_pages) {
    chunk->map[first].bits = new_size | kAllocated | kLarge;
    large_allocated_ -= old_size - new_size;
    free_pages(chunk, first + new_pages, old_pages - new_pages);
    return true;
  }
  const std::size_t next = first + old_pages;
  const std::size_t extra = new_pages - old_pages;
  if (next >= kPagesPerChunk || chunk->map[next].allocated()) return false;
  if (chunk->map[next].class_tag() != 0) return false;  // a small class's pages (chunk.h)
  const std::size_t next_pages = chunk->map[next].size_pages();
  if (next_pages < extra) return false;
  erase_free_run(&chunk->map[next]);
  carve(chunk, next, next_pages, extra);
  mark_allocated(chunk, next, extra, kAllocated | kLarge, kAllocated | kLarge, false);
  chunk->map[first].bits = new_size | kAllocated | kLarge;
  large_allocated_ += new_size - old_size;
  return true;
}

// ---- pointers, freeing and sizes ------------------------------------------

// A large allocation of `size` bytes at `page` (Arena::free has classified it).
void Arena::free_large_locked(Chunk* chunk, std::size_t page, std::size_t size) {
  ++large_nfree_;
  if constexpr (kLargeRunCache) {
    if (large_cache_.push(chunk->page_address(page), size >> kPageShift)) return;
  }
  release_large_run(chunk, page, size);
}

void Arena::free_large_then_unlock(Chunk* chunk, std::size_t page, std::size_t size) {
  free_large_locked(chunk, page, size);
  lock.unlock();
}

void Arena::release_large_run(Chunk* chunk, std::size_t page, std::size_t size) {
  const std::size_t pages = size >> kPageShift;
  // Only kept runs left after this free? (free_pages may unmap an empty chunk.)
  const bool leaves_kept_runs_alone =
      chunk->kept_pages != 0 && chunk->allocated_pages - pages == chunk->kept_pages;
  large_allocated_ -= size;
  free_pages(chunk, page, pages);
  if (leaves_kept_runs_alone) release_kept_runs_if_idle(chunk);
}

// Takes the remote frees in first, as every path under the lock does: a
// region another thread freed is free here, not live (realloc and
// malloc_usable_size ask through this).
std::size_t Arena::usable_size(Chunk* chunk, const void* p, BadPointer* problem) {
  LockGuard guard(lock);
  take_remote_frees();
  const PointerClass target = classify(chunk, p);
  *problem = target.problem;
  if (target.problem != BadPointer::kNone) return 0;
  if (target.run == nullptr) {
    if (large_run_cached(chunk, target.page, target.large_size))
      return *problem = BadPointer::kDoubleFreeLarge, 0;
    return target.large_size;
  }
  if (target.run->is_free(target.region)) return *problem = BadPointer::kDoubleFreeSmall, 0;
  return target.info->size;
}

}  // namespace runsel
