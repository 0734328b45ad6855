// Arena::classify (arena.h): where a pointer into one of an arena's chunks
// points. Inline: it is on every free. Included at the end of arena.h, since
// it needs the whole Arena.
#pragma once

#include <bit>
#include <cstdint>

#include "arena/arena.h"

namespace runsel {

// Inline: it is on every free.
inline PointerClass Arena::classify(Chunk* chunk, const void* p, std::size_t expected_bin) const {
  PointerClass target;
  target.page = chunk->page_index(p);
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t bits = chunk->map[target.page].bits;
  // A small run's page, the common case, in one test: allocated, neither
  // large nor reserved (chunk.h).
  if ((bits & (kReserved | kAllocated | kLarge)) != kAllocated) [[unlikely]] {
    if (bits & kReserved) {
      target.problem = BadPointer::kInHeader;
    } else if (!(bits & kAllocated)) {
      target.problem = BadPointer::kFreePage;
    } else {
      // Only a head page has a size; a tail page or an unaligned pointer is interior.
      target.large_size = bits & ~kPageMask;
      if (target.large_size == 0 || (address & kPageMask) != 0) {
        target.problem = BadPointer::kInteriorLarge;
      }
    }
    return target;
  }
  target.run = reinterpret_cast<Run*>(bits & ~kPageMask);
  if (expected_bin != kAnyBin && target.run->bin == &bins_[expected_bin] &&
      target.run->header_intact(run_key_)) {
    target.info = &bin_info(expected_bin);
  } else if (!run_header_intact(target.run)) {
    target.problem = BadPointer::kCorruptRunHeader;
    return target;
  } else {
    target.info = &info_of_run(target.run);
  }
  target.bin = static_cast<std::size_t>(target.info - &bin_info(0));
  const std::uintptr_t reg0 =
      reinterpret_cast<std::uintptr_t>(target.run) + target.info->reg0_offset;
  target.region = address < reg0 ? 0 : target.info->region_index(address - reg0);
  if (address < reg0 || reg0 + std::size_t{target.region} * target.info->size != address) {
    // Inside a free region: a stale pointer into memory reused since.
    const bool in_free_region = address >= reg0 && target.run->is_free(target.region);
    target.problem = in_free_region ? BadPointer::kStaleSmall : BadPointer::kInteriorSmall;
  }
  return target;
}

inline PointerClass Arena::classify_tagged(Chunk* chunk, const void* p) const {
  PointerClass target;
  target.page = chunk->page_index(p);
  const std::uintptr_t bits = chunk->map[target.page].bits;
  // A small run's page (allocated, neither large nor reserved) with a class
  // tag, 1 + the class (new_small_run), in one compare: less the flags and
  // tag of class 0, rotated by the tag's shift, such an entry is its class
  // and any other (a flag bit, or no tag) is at least 2^60.
  constexpr std::uintptr_t kTagged = kReserved | kAllocated | kLarge | kClassTagMask;
  const std::size_t bin =
      std::rotr((bits & kTagged) - (kAllocated | class_tag_of_bin(0)), kClassTagShift);
  if (bin >= kNumBins) [[unlikely]]
    return target;
  Run* run = reinterpret_cast<Run*>(bits & ~kPageMask);
  const TaggedClass& tagged = tagged_classes_[bin];
  if (run->bin != tagged.bin) [[unlikely]]
    return target;
  // The offset in 32 bits: a run is at most kMaxSmallRunPages long.
  const auto offset = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(p)) -
                      static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(run));
  const std::uint32_t region =
      region_at(offset, tagged.reg0_offset, tagged.reciprocal, tagged.reciprocal_low);
  if (region >= kNoRegion) [[unlikely]]
    return target;
  target.run = run;
  target.info = &bin_info(bin);
  target.bin = bin;
  target.region = region;
  return target;
}

}  // namespace runsel
