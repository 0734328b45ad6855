// The chunk registry: a two-level radix tree from each 1 MiB-aligned address
// runsel owns to a tagged word (arena chunk header, or huge allocation node).
// It is how free() tells runsel's pointers from foreign ones without touching
// memory that may not be mapped. Reads are lock-free; writes take a lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace runsel {

class ChunkRegistry {
 public:
  static constexpr unsigned kChunkShift = 20;   // 1 MiB chunks
  static constexpr unsigned kAddressBits = 48;  // user-space addresses
  static constexpr unsigned kKeyBits = kAddressBits - kChunkShift;
  static constexpr unsigned kLeafBits = kKeyBits / 2;
  static constexpr unsigned kRootBits = kKeyBits - kLeafBits;
  static constexpr std::size_t kLeafEntries = std::size_t{1} << kLeafBits;
  static constexpr std::size_t kLeafBytes = kLeafEntries * sizeof(std::uintptr_t);

  // Value stored for the chunk containing `address`, or 0 if not runsel's.
  static std::uintptr_t lookup(const void* address) {
    std::uintptr_t key = reinterpret_cast<std::uintptr_t>(address) >> kChunkShift;
    if (key >> kKeyBits) return 0;
    Leaf* leaf = root_[key >> kLeafBits].load(std::memory_order_acquire);
    if (leaf == nullptr) return 0;
    return leaf->entries[key & (kLeafEntries - 1)].load(std::memory_order_acquire);
  }

  // Records `value` for every chunk in [chunk, chunk + size). Returns false if
  // a leaf could not be mapped. `value` 0 unregisters.
  static bool set_range(const void* chunk, std::size_t size, std::uintptr_t value);

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
