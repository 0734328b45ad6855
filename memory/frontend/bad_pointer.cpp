// Every fatal message about a pointer passed to the C API: what is wrong with
// it, written through the one fatal path (platform/fatal.h).
#include <cstdint>

#include "arena/arena.h"
#include "arena/huge.h"
#include "frontend/frontend.h"
#include "platform/fatal.h"

namespace runsel {

void fatal_pointer(const char* function, const void* pointer, const char* problem) {
  fatal(function, "(", pointer, "): ", problem);
}

void fatal_corrupt_run(const char* function, const void* pointer, const void* run) {
  fatal(function, "(", pointer, "): heap corruption: the header of run ", run,
        " is damaged (a write past the end of the block before it?)");
}

namespace {

const char* describe(BadPointer problem) {
  switch (problem) {
    case BadPointer::kDoubleFreeSmall:
      return "double free of a small region";
    case BadPointer::kFreePage:
      return "double free: nothing is allocated at this address any more (its page is free)";
    case BadPointer::kInteriorSmall:
      return "not the start of a small region (an interior pointer, or a stale one into memory "
             "reused since)";
    case BadPointer::kStaleSmall:
      return "not the start of a small region, and the region it points into is free (a double "
             "free of memory reused since by another size class?)";
    case BadPointer::kInteriorLarge:
      return "not the start of a large allocation (an interior pointer, or a stale one into "
             "memory reused since)";
    case BadPointer::kDoubleFreeLarge:
      return "double free of a large allocation (its run is in its arena's cache of freed runs)";
    case BadPointer::kInHeader:
      return "not allocated by runsel (points into a chunk header)";
    case BadPointer::kCorruptRunHeader:  // reported by fatal_bad_pointer
      break;
    case BadPointer::kNone:
      break;
  }
  return "invalid pointer";
}

}  // namespace

[[noreturn]] void fatal_bad_pointer(const char* function, const void* p, Chunk* chunk,
                                    BadPointer problem) {
  if (problem == BadPointer::kCorruptRunHeader) {
    const std::uintptr_t bits = chunk->map[chunk->page_index(p)].bits;
    fatal_corrupt_run(function, p, reinterpret_cast<const void*>(bits & ~kPageMask));
  }
  fatal_pointer(function, p, describe(problem));
}

[[noreturn]] void fatal_huge(const char* function, const void* p, huge::Problem problem) {
  switch (problem) {
    case huge::Problem::kDoubleFree:
      fatal_pointer(function, p, "double free of a huge allocation");
    case huge::Problem::kInterior:
      fatal_pointer(function, p, "not the start of a huge allocation (interior pointer)");
    case huge::Problem::kOverflowPastEnd:
      fatal_pointer(function, p,
                    "heap corruption: a write past the end of this huge allocation damaged the "
                    "header of the chunk after it");
    default:
      break;
  }
  fatal_pointer(function, p, "not allocated by runsel (foreign pointer)");
}

[[noreturn]] void fatal_unregistered(const char* function, const void* p) {
  if (huge::recently_freed(p)) fatal_huge(function, p, huge::Problem::kDoubleFree);
  // Every huge allocation starts on a chunk boundary; runsel remembers only
  // the last 64 it freed, so an older one looks like any unknown address.
  if ((reinterpret_cast<std::uintptr_t>(p) & kChunkMask) == 0) {
    fatal_pointer(function, p,
                  "not allocated by runsel, or a huge allocation freed before (a foreign "
                  "pointer, or a double free)");
  }
  fatal_huge(function, p, huge::Problem::kUnknown);
}

}  // namespace runsel
