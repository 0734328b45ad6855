// The replayer's slots: recorded address -> the pointer the replay got for it.
// Open addressing with linear probing in mmap'd memory, so the replayer's own
// bookkeeping never goes through the allocator whose stats it reports.
#ifndef RUNSEL_TRACE_ADDRESS_TABLE_H
#define RUNSEL_TRACE_ADDRESS_TABLE_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace runsel::trace {

class AddressTable {
 public:
  AddressTable() { allocate(1u << 16); }
  // Room for `entries` bindings without growing; with `touch`, its memory is written
  // now, so it is resident from here on (the harness's replay workload sizes it
  // before its measured region, so the table never changes resident memory there).
  AddressTable(std::size_t entries, bool touch) {
    std::size_t capacity = 1u << 16;
    while (capacity < 2 * (entries + 1)) capacity *= 2;
    allocate(capacity);
    if (touch) {
      volatile char* bytes = reinterpret_cast<volatile char*>(slots_);
      for (std::size_t i = 0; i < capacity * sizeof(Slot); i += 4096) bytes[i] = 0;
    }
  }
  ~AddressTable() { munmap(slots_, capacity_ * sizeof(Slot)); }
  AddressTable(const AddressTable&) = delete;
  AddressTable& operator=(const AddressTable&) = delete;

  // The pointer bound to key (never 0), or nullptr.
  void* find(std::uint64_t key) const {
    for (std::size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  // Binds key to value; returns the value it replaces, or nullptr.
  void* insert(std::uint64_t key, void* value) {
    if (2 * (size_ + 1) > capacity_) grow();
    std::size_t i = home(key);
    while (slots_[i].key != 0 && slots_[i].key != key) i = next(i);
    void* old = slots_[i].key == key ? slots_[i].value : nullptr;
    if (slots_[i].key == 0) ++size_;
    slots_[i] = {key, value};
    return old;
  }

  // Unbinds key; returns its pointer, or nullptr when it was not bound.
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  void* erase(std::uint64_t key) {
    std::size_t i = home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return nullptr;
      i = next(i);
    }
    void* value = slots_[i].value;
    for (std::size_t j = next(i);; j = next(j)) {
      if (slots_[j].key == 0) break;
      std::size_t h = home(slots_[j].key);
      // Slot j may move to the hole at i unless its home lies cyclically in (i, j].
      bool stays = (i < j) ? (h > i && h <= j) : (h > i || h <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = {0, nullptr};
    --size_;
    return value;
  }

  std::size_t size() const { return size_; }
  std::size_t bytes() const { return capacity_ * sizeof(Slot); }  // mapped for the slots

  // Bytes of the table that are resident now (mincore): a replay subtracts them
  // from the process's memory to report the heap's alone.
  std::size_t resident_bytes() const {
    static unsigned char pages[4096];  // one byte per page, 16 MiB per call
    std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), total = 0;
    auto* start = reinterpret_cast<unsigned char*>(slots_);
    std::size_t length = bytes();
    for (std::size_t done = 0; done < length; done += sizeof pages * page) {
      std::size_t chunk = length - done < sizeof pages * page ? length - done : sizeof pages * page;
      if (mincore(start + done, chunk, pages) != 0) return 0;
      for (std::size_t i = 0; i < (chunk + page - 1) / page; ++i) total += (pages[i] & 1) * page;
    }
    return total;
  }

 private:
  struct Slot {
    std::uint64_t key;
    void* value;
  };

  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - bits_));
  }
  std::size_t next(std::size_t i) const { return (i + 1) & (capacity_ - 1); }

  void allocate(std::size_t capacity) {
    void* memory = mmap(nullptr, capacity * sizeof(Slot), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) std::abort();
    slots_ = static_cast<Slot*>(memory);  // zero: every slot empty
    capacity_ = capacity;
    bits_ = 0;
    while ((std::size_t{1} << bits_) < capacity) ++bits_;
    size_ = 0;
  }

  void grow() {
    Slot* old = slots_;
    std::size_t old_capacity = capacity_;
    allocate(2 * capacity_);
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].key != 0) insert(old[i].key, old[i].value);
    munmap(old, old_capacity * sizeof(Slot));
  }

  Slot* slots_ = nullptr;
  std::size_t capacity_ = 0;
  unsigned bits_ = 0;
  std::size_t size_ = 0;
};

}  // namespace runsel::trace

#endif
