// The chunk registry: a two-level radix tree from each 1 MiB-aligned address
// runsel owns to its owner (an arena chunk's arena, or a huge allocation's node).
// It is how free() tells runsel's pointers from foreign ones without touching
// memory that may not be mapped. Reads are lock-free; writes take a lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/lock.h"
#include "structures/chunk_geometry.h"

namespace runsel {

// Serialises the registry's writers (readers take no lock: the entries are
// atomics, and leaves are never unmapped). Last in the lock order
// (memory/README.md): nothing is locked while it is held.
extern Lock g_registry_lock;

// What the registry holds for a chunk: nobody (the chunk is not runsel's), an
// arena chunk (its arena: the chunk header does not hold it, so that a write
// into the header cannot send a free to another arena) or a huge allocation
// (the address of its tracking node). One word: the low bit tags a huge node
// (both kinds of address are at least 2-aligned).
class ChunkOwner {
 public:
  static constexpr ChunkOwner none() { return ChunkOwner(0); }
  static ChunkOwner arena_chunk(const void* arena) { return ChunkOwner(address(arena)); }
  static ChunkOwner huge(const void* node) { return ChunkOwner(address(node) | kHugeTag); }
  static constexpr ChunkOwner from_word(std::uintptr_t word) { return ChunkOwner(word); }

  bool is_none() const { return word_ == 0; }
  bool is_huge() const { return (word_ & kHugeTag) != 0; }
  bool is_arena_chunk() const { return !is_none() && !is_huge(); }
  // The arena or the huge node, with the tag removed.
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(word_ & ~kHugeTag);
  }
  std::uintptr_t word() const { return word_; }

 private:
  static constexpr std::uintptr_t kHugeTag = 1;
  constexpr explicit ChunkOwner(std::uintptr_t word) : word_(word) {}
  static std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

  std::uintptr_t word_;
};

class ChunkRegistry {
 public:
  static constexpr unsigned kAddressBits = 48;  // user-space addresses
  static constexpr unsigned kKeyBits = kAddressBits - static_cast<unsigned>(kChunkShift);
  static constexpr unsigned kLeafBits = kKeyBits / 2;
  static constexpr unsigned kRootBits = kKeyBits - kLeafBits;
  static constexpr std::size_t kLeafEntries = std::size_t{1} << kLeafBits;
  static constexpr std::size_t kLeafBytes = kLeafEntries * sizeof(std::uintptr_t);

  // The owner of the chunk containing `address` (none() if not runsel's).
  static ChunkOwner lookup(const void* address) {
    std::uintptr_t key = reinterpret_cast<std::uintptr_t>(address) >> kChunkShift;
    if (key >> kKeyBits) return ChunkOwner::none();
    Leaf* leaf = root_[key >> kLeafBits].load(std::memory_order_acquire);
    if (leaf == nullptr) return ChunkOwner::none();
    return ChunkOwner::from_word(
        leaf->entries[key & (kLeafEntries - 1)].load(std::memory_order_acquire));
  }

  // Records `owner` for every chunk in [chunk, chunk + size). Returns false if
  // a leaf could not be mapped or a chunk lies beyond kAddressBits; the
  // chunks before it stay recorded. ChunkOwner::none() unregisters.
  static bool set_range(const void* chunk, std::size_t size, ChunkOwner owner);

  // Bytes of leaves mapped so far (bookkeeping).
  static std::size_t mapped_bytes();

  static void lock_for_fork();
  static void unlock_after_fork_in_parent();
  static void reset_after_fork_in_child();

 private:
  struct Leaf {
    std::atomic<std::uintptr_t> entries[kLeafEntries];
  };
  static std::atomic<Leaf*> root_[std::size_t{1} << kRootBits];
};

}  // namespace runsel
