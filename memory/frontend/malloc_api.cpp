// The C allocation API. Sizes are routed to small bins, large page runs or
// huge mappings; pointers are validated through the chunk registry before
// anything touches the memory they point to.
#include <errno.h>
#include <stdint.h>

#include <cstring>

#include "arena/huge.h"
#include "arena/small_paths.h"
#include "frontend/frontend.h"
#include "frontend/thread_cache.h"
#include "runsel.h"
#include "structures/chunk_registry.h"

namespace runsel {

namespace {

constexpr std::size_t kMaxRequest = PTRDIFF_MAX;

// A failed allocation: sets errno and returns null. Out of line, so that the
// inline allocate() keeps nothing live for it.
[[gnu::noinline]] void* out_of_memory() {
  errno = ENOMEM;
  return nullptr;
}

// A small allocation with the any-thread lock, or the first of a thread (which
// has no arena yet).
[[gnu::noinline]] void* allocate_small_any_thread(std::size_t size, bool zero) {
  Arena* arena = thread_arena();
  void* p = arena ? arena->malloc_small(bin_index(size)) : nullptr;
  if (p == nullptr) return out_of_memory();
  if (zero) std::memset(p, 0, bin_size(bin_index(size)));  // the whole usable size
  return p;
}

#if RUNSEL_THREAD_CACHE
// A small allocation the thread cache's inline path left: the whole pop or a
// fill, or (no cache for this thread: an exiting one, or out of metadata
// memory) the uncached path.
[[gnu::noinline]] void* allocate_small_cache_miss(std::size_t size, bool zero) {
  void* p = thread_cache::pop_or_fill(bin_index(size));
  if (p == nullptr) return allocate_small_any_thread(size, zero);
  if (zero) std::memset(p, 0, bin_size(bin_index(size)));
  return p;
}
#endif

[[gnu::noinline]] void* allocate_beyond_small(std::size_t size, bool zero) {
  void* p;
#if RUNSEL_THREAD_CACHE
  // A freed run of its length from the thread's cache (the fast profile).
  // (Below kMaxLargeSize, page_ceiling cannot wrap to a small size.)
  if (size <= kMaxLargeSize && thread_cache::large_cacheable(page_ceiling(size))) {
    const std::size_t psize = page_ceiling(size);
    p = thread_cache::pop_large(psize >> kPageShift);
    if (p != nullptr) {
      if (zero) std::memset(p, 0, psize);
      return p;
    }
  }
#endif
  if (size <= kMaxLargeSize) {
    Arena* arena = thread_arena();
    p = arena ? arena->malloc_large(page_ceiling(size), zero) : nullptr;
  } else if (size <= kMaxRequest) {
    p = huge::allocate(size, kChunkSize, zero);
  } else {
    p = nullptr;
  }
  if (p == nullptr) return out_of_memory();
  return p;
}

// Inline in every entry point: the common case of malloc (a small size, in
// the thread's arena, while the process has one thread) then calls nothing.
[[gnu::always_inline]] inline void* allocate(std::size_t size, bool zero) {
  if (!is_small(size)) return allocate_beyond_small(size, zero);
#if RUNSEL_THREAD_CACHE
  if (void* p = thread_cache::pop_fast(size)) {
    if (zero) std::memset(p, 0, bin_size(bin_index(size)));
    return p;
  }
  return allocate_small_cache_miss(size, zero);
#else
  Arena* arena = t_arena;
  if (arena == nullptr || !os::single_threaded()) return allocate_small_any_thread(size, zero);
  void* p = arena->malloc_small_one_thread(bin_index(size));
  if (p == nullptr) return out_of_memory();
  if (zero) std::memset(p, 0, bin_size(bin_index(size)));  // the whole usable size
  return p;
#endif
}

// Returns `p`, having set errno to ENOMEM when it is null.
void* enomem_if_null(void* p) {
  if (p == nullptr) errno = ENOMEM;
  return p;
}

// A large allocation of `psize` bytes (a page multiple up to kMaxLargeSize):
// page-aligned whatever the size classes are.
void* allocate_pages(std::size_t psize) {
  Arena* arena = thread_arena();
  return enomem_if_null(arena ? arena->malloc_large(psize, false) : nullptr);
}

// `alignment` is a power of two.
void* allocate_aligned(std::size_t alignment, std::size_t size) {
  RUNSEL_ASSERT(alignment != 0 && (alignment & (alignment - 1)) == 0);
  if (alignment <= kQuantum) return allocate(size, false);
  if (size > kMaxRequest || alignment > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  if (size == 0) size = 1;
  if (alignment < kPageSize) {
    // Regions of a class whose size is a multiple of the alignment are
    // aligned, because regions are packed against the page-aligned run end.
    std::size_t wanted = (size + alignment - 1) & ~(alignment - 1);
    // A class bigger than the pages `wanted` needs would hold more than a
    // page-aligned large allocation does.
    if (is_small(wanted)) {
      std::size_t bin = bin_index(wanted);
      while (bin < kNumBins && bin_size(bin) % alignment != 0) ++bin;
      if (bin < kNumBins && bin_size(bin) <= page_ceiling(wanted)) {
        return allocate(bin_size(bin), false);
      }
    }
    return size > kMaxLargeSize ? allocate(size, false) : allocate_pages(page_ceiling(size));
  }
  const std::size_t psize = page_ceiling(size);
  if (alignment == kPageSize && psize <= kMaxLargeSize) return allocate_pages(psize);
  if (alignment < kChunkSize && psize + alignment - kPageSize <= kMaxLargeSize) {
    Arena* arena = thread_arena();
    return enomem_if_null(arena ? arena->malloc_large_aligned(psize, alignment) : nullptr);
  }
  return enomem_if_null(
      huge::allocate(size, alignment > kChunkSize ? alignment : kChunkSize, false));
}

// deallocate() of a pointer that is not in an arena chunk: a huge allocation,
// or a foreign pointer.
[[gnu::noinline]] void deallocate_outside_arenas(void* p, const char* function, ChunkOwner owner) {
  if (owner.is_none()) fatal_unregistered(function, p);
  huge::Problem problem = huge::release(p);
  if (problem != huge::Problem::kNone) fatal_huge(function, p, problem);
}

// deallocate() of a pointer in an arena chunk while the process has threads:
// with the arena's lock from a thread of that arena, else (a remote free)
// queued for it without its lock (Arena::free_remote).
[[gnu::noinline]] void deallocate_any_thread(void* p, const char* function, Arena* arena) {
  Chunk* chunk = Chunk::of(p);
  BadPointer problem = arena == t_arena ? arena->free(chunk, p) : arena->free_remote(chunk, p);
  if (problem != BadPointer::kNone) fatal_bad_pointer(function, p, chunk, problem);
}

#if RUNSEL_THREAD_CACHE
// deallocate() of a small region the thread cache's inline path left: the
// whole push, else the uncached free. A tail call from deallocate.
[[gnu::noinline]] void deallocate_cache_slow(void* p, const char* function, Arena* arena) {
  if (thread_cache::push(p, arena, Arena::kAnyBin, function)) return;
  deallocate_any_thread(p, function, arena);
}

// deallocate() of what is not a cached free into the thread's known chunk:
// the registry says whose chunk it is. A tail call from deallocate, so that
// the inline path keeps nothing live for this one and saves no registers.
// A thread without a cache: straight to the uncached free, without push_fast,
// push and their calls. Apart from deallocate_through_registry, whose common
// case then saves no registers (this one's call needs them saved).
[[gnu::noinline]] void deallocate_cacheless(void* p, const char* function, Arena* arena) {
  thread_cache::check_cacheless_free(p, arena, function);
  return deallocate_any_thread(p, function, arena);
}

[[gnu::noinline]] void deallocate_through_registry(void* p, const char* function) {
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  if (!owner.is_arena_chunk()) return deallocate_outside_arenas(p, function, owner);
  Arena* arena = owner.as<Arena>();
  if (thread_cache::t_slot.cache == nullptr) [[unlikely]]
    return deallocate_cacheless(p, function, arena);
  if (thread_cache::push_fast(p, arena)) {
    thread_cache::remember_chunk(p, arena);
    return;
  }
  return deallocate_cache_slow(p, function, arena);
}
#endif

// Inline in free and realloc: the common case of free (a small region while
// the process has one thread) then calls nothing. The arena comes from the
// registry, never from the chunk header.
[[gnu::always_inline]] inline void deallocate(void* p, const char* function) {
#if RUNSEL_THREAD_CACHE
  // Null is never in the known chunk, so the common case skips its test.
  if (thread_cache::push_known_chunk(p)) return;
  if (p == nullptr) return;
  return deallocate_through_registry(p, function);
#else
  if (p == nullptr) return;
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  if (!owner.is_arena_chunk()) return deallocate_outside_arenas(p, function, owner);
  Arena* arena = owner.as<Arena>();
  if (!os::single_threaded()) return deallocate_any_thread(p, function, arena);
  Chunk* chunk = Chunk::of(p);
  BadPointer problem = arena->free_one_thread(chunk, p);
  if (problem != BadPointer::kNone) fatal_bad_pointer(function, p, chunk, problem);
#endif
}

// Sized delete: the size names the bin, so a small free finds its class's
// geometry from the size instead of through the run header's bin pointer,
// which it then only compares (Arena::classify's expected_bin). A size that
// does not match the run is ignored, and the free goes on as an unsized one.
// Remote frees go through the queue (Arena::free_remote) as unsized ones.
// What follows the thread cache's known-chunk path (all of it without the
// cache), for a small size.
[[gnu::always_inline]] inline void deallocate_sized_small(void* p, std::size_t size) {
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  if (!owner.is_arena_chunk()) return deallocate_outside_arenas(p, "free", owner);
  Arena* arena = owner.as<Arena>();
#if RUNSEL_THREAD_CACHE
  if (thread_cache::push_fast(p, arena)) {
    thread_cache::remember_chunk(p, arena);
    return;
  }
  if (thread_cache::push(p, arena, bin_index(size), "free")) return;
#endif
  Chunk* chunk = Chunk::of(p);
  BadPointer problem;
  if (os::single_threaded()) {
    problem = arena->free_one_thread(chunk, p, bin_index(size));
  } else if (arena == t_arena) {
    problem = arena->free_sized(chunk, p, bin_index(size));
  } else {
    problem = arena->free_remote(chunk, p);
  }
  if (problem != BadPointer::kNone) fatal_bad_pointer("free", p, chunk, problem);
}

#if RUNSEL_THREAD_CACHE
// A tail call from deallocate_sized, as deallocate_through_registry is from
// deallocate.
[[gnu::noinline]] void deallocate_sized_through_registry(void* p, std::size_t size) {
  deallocate_sized_small(p, size);
}
#endif

[[gnu::always_inline]] inline void deallocate_sized(void* p, std::size_t size) {
  if (p == nullptr) return;
  if (!is_small(size)) return deallocate(p, "free");
#if RUNSEL_THREAD_CACHE
  if (thread_cache::push_known_chunk(p)) return;
  return deallocate_sized_through_registry(p, size);
#else
  deallocate_sized_small(p, size);
#endif
}

// Usable size of a pointer the caller claims is live; aborts if it is not.
// *is_huge tells which allocator path owns it (a huge allocation can be
// small when it was made with a chunk-sized alignment).
std::size_t usable_size_checked(const void* p, const char* function, bool* is_huge) {
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  if (owner.is_none()) fatal_unregistered(function, p);
  *is_huge = owner.is_huge();
  if (owner.is_huge()) {
    huge::Problem problem;
    std::size_t size = huge::usable_size(p, &problem);
    if (problem != huge::Problem::kNone) fatal_huge(function, p, problem);
    return size;
  }
  Chunk* chunk = Chunk::of(p);
  BadPointer problem;
  std::size_t size = owner.as<Arena>()->usable_size(chunk, p, &problem);
  if (problem != BadPointer::kNone) fatal_bad_pointer(function, p, chunk, problem);
  return size;
}

bool resize_in_place(void* p, bool is_huge, std::size_t old_size, std::size_t size) {
  if (is_huge) return size > kMaxLargeSize && huge::resize_in_place(p, old_size, size);
  if (is_small(old_size)) return is_small(size) && bin_index(size) == bin_index(old_size);
  if (is_small(size) || size > kMaxLargeSize) return false;
  const std::size_t psize = page_ceiling(size);
  if (psize == old_size) return true;
  Arena* arena = ChunkRegistry::lookup(p).as<Arena>();  // checked live by the caller
  return arena->resize_large_in_place(Chunk::of(p), p, old_size, psize);
}

void* reallocate(void* p, std::size_t size) {
  if (p == nullptr) return allocate(size, false);
  if (size == 0) size = 1;  // like mozjemalloc: a minimal allocation, not a free
  if (size > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  bool is_huge;
  const std::size_t old_size = usable_size_checked(p, "realloc", &is_huge);
#if RUNSEL_THREAD_CACHE
  // A live small region or large allocation has no key; a cached (freed) one has.
  if ((is_small(old_size) || thread_cache::large_cacheable(old_size)) && !is_huge &&
      *static_cast<std::uintptr_t*>(p) == thread_cache::key_of(p))
    thread_cache::check_not_cached(p, "realloc");
#endif
  if (resize_in_place(p, is_huge, old_size, size)) return p;
  void* q = allocate(size, false);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, old_size < size ? old_size : size);
  deallocate(p, "realloc");
  return q;
}

bool is_power_of_two(std::size_t x) { return x != 0 && (x & (x - 1)) == 0; }

// aligned_alloc and memalign: any `alignment`, EINVAL when it is not a power
// of two.
void* allocate_any_alignment(std::size_t alignment, std::size_t size) {
  if (!is_power_of_two(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return allocate_aligned(alignment, size);
}

}  // namespace

std::size_t good_size(std::size_t size) {
  if (is_small(size)) return bin_size(bin_index(size));
  if (size <= kMaxRequest) return page_ceiling(size);
  return 0;
}

}  // namespace runsel

using namespace runsel;

RUNSEL_EXPORT void* malloc(size_t size) noexcept { return allocate(size, false); }

RUNSEL_EXPORT void free(void* p) noexcept { deallocate(p, "free"); }

RUNSEL_EXPORT void* calloc(size_t count, size_t size) noexcept {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return out_of_memory();
  return allocate(total, true);
}

RUNSEL_EXPORT void* realloc(void* p, size_t size) noexcept { return reallocate(p, size); }

RUNSEL_EXPORT void* reallocarray(void* p, size_t count, size_t size) noexcept {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return out_of_memory();
  return reallocate(p, total);
}

RUNSEL_EXPORT int posix_memalign(void** result, size_t alignment, size_t size) noexcept {
  if (!is_power_of_two(alignment) || alignment < sizeof(void*)) return EINVAL;
  const int saved = errno;
  void* p = allocate_aligned(alignment, size);
  errno = saved;  // posix_memalign reports through its return value only
  if (p == nullptr) return ENOMEM;
  *result = p;
  return 0;
}

RUNSEL_EXPORT void* aligned_alloc(size_t alignment, size_t size) noexcept {
  return allocate_any_alignment(alignment, size);
}

RUNSEL_EXPORT void* memalign(size_t alignment, size_t size) noexcept {
  return allocate_any_alignment(alignment, size);
}

RUNSEL_EXPORT void* valloc(size_t size) noexcept { return allocate_aligned(kPageSize, size); }

RUNSEL_EXPORT void* pvalloc(size_t size) noexcept {
  if (size > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  return allocate_aligned(kPageSize, size == 0 ? kPageSize : page_ceiling(size));
}

RUNSEL_EXPORT size_t malloc_usable_size(void* p) noexcept {
  if (p == nullptr) return 0;
  const ChunkOwner owner = ChunkRegistry::lookup(p);
  if (owner.is_none()) return 0;
  if (owner.is_huge()) {
    huge::Problem problem;
    return huge::usable_size(p, &problem);
  }
  Chunk* chunk = Chunk::of(p);
  BadPointer problem;
  const std::size_t size = owner.as<Arena>()->usable_size(chunk, p, &problem);
  // Bad pointers answer 0, but a damaged heap is never carried on with.
  if (problem == BadPointer::kCorruptRunHeader) {
    fatal_bad_pointer("malloc_usable_size", p, chunk, problem);
  }
#if RUNSEL_THREAD_CACHE
  // A cached region or run is free to the program (its key, then the caches).
  if (size != 0 && (is_small(size) || thread_cache::large_cacheable(size)) &&
      *static_cast<const std::uintptr_t*>(p) == thread_cache::key_of(p) &&
      thread_cache::is_cached(p))
    return 0;
#endif
  return size;
}

RUNSEL_EXPORT size_t runsel_good_size(size_t size) { return good_size(size); }

// C++ delete, sized and unsized, and their array forms: exported so that a
// program's sized deletes reach deallocate_sized instead of the C++ runtime's,
// which drops the size and calls free; the unsized ones are free without the
// runtime's extra call. (operator new stays the runtime's: it calls malloc.)
__attribute__((visibility("default"))) void operator delete(void* p) noexcept {
  deallocate(p, "free");
}
__attribute__((visibility("default"))) void operator delete[](void* p) noexcept {
  deallocate(p, "free");
}
__attribute__((visibility("default"))) void operator delete(void* p, std::size_t size) noexcept {
  deallocate_sized(p, size);
}
__attribute__((visibility("default"))) void operator delete[](void* p, std::size_t size) noexcept {
  deallocate_sized(p, size);
}

RUNSEL_EXPORT const char* runsel_variant(void) { return kContainerName; }

// The build profile (memory/README.md, "Profiles"): fast as meson builds it
// (the thread cache and the 5, 6 and 7 KiB classes), faithful without either
// (mozjemalloc's shape), custom for any other mix of the two.
RUNSEL_EXPORT const char* runsel_build_profile(void) {
#if RUNSEL_FAST_PROFILE
  return "fast";
#elif RUNSEL_THREAD_CACHE || RUNSEL_CLASSES48
  return "custom";
#else
  return "faithful";
#endif
}
