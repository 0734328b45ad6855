// Non-full run container "array_heap" (Mozilla bug 1857133, "priority
// queue"): a binary min-heap of runs by address, kept in an array; each run
// header holds its own index in the array so any member can be erased.
//
// Policy: the next allocation uses the lowest-addressed run, exactly as
// rb_first does (so both make the same choices), with a cheaper structure:
// no pointer chasing, the hot top of the heap in a few cache lines, and at
// most log2(n) moves per update instead of a tree walk plus rebalancing. The
// price is a side array outside the run headers, which must come from the
// allocator's own metadata allocator (never malloc) and grows by doubling; it
// is never shrunk (a bin's peak number of non-full runs bounds it).
// Complexity: insert O(log n) (amortised O(1) for the array's growth), erase
// O(log n) (sift up or down from the erased slot), pick O(1), touched O(1), a
// no-op; check O(n). Memory: one word of the 24-byte ContainerHook (the
// index), plus 8 to 16 bytes per run in the side array; three words per bin
// (array, size, capacity).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "containers/address_order.h"
#include "platform/fatal.h"
#include "structures/verified_links.h"

namespace runsel {

template <SideMemory Traits>
class ArrayHeapRuns {
 public:
  using Node = typename Traits::Node;

  static constexpr std::size_t kInitialCapacity = 16;  // 128 bytes: one base size class

  void insert(Node* run) {
    if (size_ == capacity_) grow();
    sift_up(size_++, run);
  }

  void erase(Node* run) {
    // A member: the index in its header names a slot that holds it. The
    // array is the heap's own memory; the index is in the run header, so it
    // is checked before it is used.
    const std::size_t slot = index_of(run);
    if (kVerifyLinks && (slot >= size_ || heap_[slot] != run)) [[unlikely]]
      container_links_damaged(run);
    Node* last = heap_[--size_];
    if (slot == size_) return;  // it was the last slot
    // `last` fills the hole; it may belong above or below it.
    if (slot > 0 && less(last, heap_[parent(slot)])) {
      sift_up(slot, last);
    } else {
      sift_down(slot, last);
    }
  }

  Node* pick() const { return size_ != 0 ? heap_[0] : nullptr; }
  void touched(Node*) {}
  std::size_t size() const { return size_; }

  // Invariants: size_ <= capacity_; every slot below size_ holds a run whose
  // hook index is that slot; every run is above its parent slot's run.
  bool check(const char** why) const {
    if (size_ > capacity_) return check_failed(why, "size() exceeds the array's capacity");
    if (capacity_ != 0 && heap_ == nullptr) return check_failed(why, "capacity without an array");
    for (std::size_t slot = 0; slot < size_; ++slot) {
      Node* run = heap_[slot];
      if (run == nullptr) return check_failed(why, "null run in the heap");
      if (index_of(run) != slot) return check_failed(why, "a run's heap index is not its slot");
      if (slot > 0 && !less(heap_[parent(slot)], run)) {
        return check_failed(why, "a run is not above its parent's address");
      }
    }
    return true;
  }

 private:
  static std::size_t parent(std::size_t slot) { return (slot - 1) / 2; }
  static std::size_t& index_of(Node* run) { return Traits::hook(run).heap_index; }
  static bool less(const Node* a, const Node* b) { return address_less(a, b); }

  void place(std::size_t slot, Node* run) {
    heap_[slot] = run;
    index_of(run) = slot;
  }

  // Moves `run` from the hole at `slot` towards the root while it is lower
  // than its parent.
  void sift_up(std::size_t slot, Node* run) {
    while (slot > 0) {
      Node* above = heap_[parent(slot)];
      if (!less(run, above)) break;
      place(slot, above);
      slot = parent(slot);
    }
    place(slot, run);
  }

  // Moves `run` from the hole at `slot` towards the leaves while a child is
  // lower than it.
  void sift_down(std::size_t slot, Node* run) {
    for (;;) {
      std::size_t lower = 2 * slot + 1;
      if (lower >= size_) break;
      if (lower + 1 < size_ && less(heap_[lower + 1], heap_[lower])) ++lower;
      if (!less(heap_[lower], run)) break;
      place(slot, heap_[lower]);
      slot = lower;
    }
    place(slot, run);
  }

  void grow() {
    const std::size_t capacity = capacity_ == 0 ? kInitialCapacity : 2 * capacity_;
    void* memory =
        capacity <= SIZE_MAX / sizeof(Node*) ? Traits::allocate(capacity * sizeof(Node*)) : nullptr;
    if (memory == nullptr) out_of_metadata();
    Node** array = static_cast<Node**>(memory);
    if (size_ != 0) std::memcpy(array, heap_, size_ * sizeof(Node*));
    if (heap_ != nullptr) Traits::release(heap_, capacity_ * sizeof(Node*));
    heap_ = array;
    capacity_ = capacity;
  }

  // No exceptions and no way to refuse an insert: a bin cannot continue
  // without its run set, so this is fatal.
  [[noreturn]] static void out_of_metadata() {
    fatal("array_heap: out of metadata memory growing the heap");
  }

  Node** heap_ = nullptr;  // heap_[0] is the lowest run; children of i: 2i+1, 2i+2
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace runsel
