// What a pointer passed to free, realloc or malloc_usable_size points at, and
// why it was refused (Arena::classify, pointer_class_inline.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena/run.h"
#include "arena/size_classes.h"

namespace runsel {

// Reason a pointer was refused; the front end turns it into the fatal message.
enum class BadPointer {
  kNone,
  kDoubleFreeSmall,
  kFreePage,       // the page is free: a double free, or never allocated
  kInteriorSmall,  // inside a live small region
  kStaleSmall,     // inside a free small region: memory reused since it was freed
  kInteriorLarge,
  kDoubleFreeLarge,   // a large run in its arena's cache of freed runs (the fast profile)
  kInHeader,          // chunk header or guard page
  kCorruptRunHeader,  // the small run's header fails its check: overwritten
};

// What a pointer into one of an arena's chunks points at (Arena::classify).
struct PointerClass {
  BadPointer problem = BadPointer::kNone;  // kNone: the start of a large allocation or small region
  std::size_t page = 0;                    // its page in the chunk
  std::size_t large_size = 0;              // a large allocation: its size in bytes; else 0
  Run* run = nullptr;                      // a small region: its run
  const BinInfo* info = nullptr;           //   and that run's size class
  std::size_t bin = 0;                     //   and that class's index
  std::uint32_t region = 0;                //   and its index in the run
};

}  // namespace runsel
