// The replayer's slots: recorded address -> the pointer the replay got for it.
// Open addressing with linear probing in mmap'd memory, so the replayer's own
// bookkeeping never goes through the allocator whose stats it reports. A mapping
// that cannot be had is never fatal here: failed() says so, with its size and
// errno, and the caller refuses the replay with one line.
#ifndef RUNSEL_TRACE_ADDRESS_TABLE_H
#define RUNSEL_TRACE_ADDRESS_TABLE_H

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace runsel::trace {

class AddressTable {
 public:
  static constexpr std::size_t kSlotBytes = 16;  // a key and a pointer
  static constexpr std::size_t kMinCapacity = std::size_t{1} << 16;

  // The slots a table sized for `entries` bindings has: at least twice as many (the
  // load stays at most one half), a power of two, at least kMinCapacity. A table that
  // grows as it goes never has more for the same entries. Saturates instead of
  // overflowing (0: more than the address space).
  static std::size_t capacity_for(std::uint64_t entries) {
    if (entries >= SIZE_MAX / 4) return 0;
    std::size_t capacity = kMinCapacity;
    while (capacity < 2 * (entries + 1)) {
      if (capacity > SIZE_MAX / (2 * kSlotBytes)) return 0;
      capacity *= 2;
    }
    return capacity;
  }
  // Its bytes (SIZE_MAX when capacity_for saturates).
  static std::size_t bytes_for(std::uint64_t entries) {
    std::size_t capacity = capacity_for(entries);
    return capacity == 0 ? SIZE_MAX : capacity * kSlotBytes;
  }

  AddressTable() { allocate(kMinCapacity); }
  // Room for `entries` bindings without growing; with `touch`, its memory is written
  // now, so it is resident from here on (the harness's replay workload sizes it
  // before its measured region, so the table never changes resident memory there).
  AddressTable(std::size_t entries, bool touch) {
    std::size_t capacity = capacity_for(entries);
    if (!allocate(capacity)) return;
    if (touch) {
      volatile char* bytes = reinterpret_cast<volatile char*>(slots_);
      for (std::size_t i = 0; i < capacity * sizeof(Slot); i += 4096) bytes[i] = 0;
    }
  }
  ~AddressTable() {
    if (slots_ != nullptr) munmap(slots_, capacity_ * sizeof(Slot));
  }
  AddressTable(const AddressTable&) = delete;
  AddressTable& operator=(const AddressTable&) = delete;

  // Whether a mapping the table needed could not be had: at construction (then it
  // holds nothing and binds nothing) or to grow (then it keeps what it had and binds
  // nothing more). failed_bytes() is the mapping asked for, failed_errno() why.
  bool failed() const { return failed_bytes_ != 0; }
  std::size_t failed_bytes() const { return failed_bytes_; }
  int failed_errno() const { return failed_errno_; }

  // The pointer bound to key (never 0), or nullptr.
  void* find(std::uint64_t key) const {
    if (slots_ == nullptr) return nullptr;
    for (std::size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  // Binds key to value; returns the value it replaces, or nullptr. When the table
  // must grow and cannot, nothing is bound and failed() says so.
  void* insert(std::uint64_t key, void* value) {
    if (2 * (size_ + 1) > capacity_ && !grow()) return nullptr;
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
    if (slots_ == nullptr) return nullptr;
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
    if (slots_ == nullptr) return 0;
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

  // Maps an empty table of `capacity` slots (0: more than the address space); false
  // (failed() set, the table unchanged) when the mapping cannot be had.
  bool allocate(std::size_t capacity) {
    std::size_t bytes = capacity == 0 ? SIZE_MAX : capacity * sizeof(Slot);
    void* memory = capacity == 0 ? MAP_FAILED
                                 : mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      failed_bytes_ = bytes;
      failed_errno_ = capacity == 0 ? ENOMEM : errno;
      return false;
    }
    slots_ = static_cast<Slot*>(memory);  // zero: every slot empty
    capacity_ = capacity;
    bits_ = 0;
    while ((std::size_t{1} << bits_) < capacity) ++bits_;
    size_ = 0;
    return true;
  }

  bool grow() {
    if (capacity_ == 0) return false;  // the first mapping failed already
    Slot* old = slots_;
    std::size_t old_capacity = capacity_;
    if (!allocate(capacity_ > SIZE_MAX / (2 * sizeof(Slot)) ? 0 : 2 * capacity_)) return false;
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].key != 0) insert(old[i].key, old[i].value);
    munmap(old, old_capacity * sizeof(Slot));
    return true;
  }

  Slot* slots_ = nullptr;
  std::size_t capacity_ = 0;
  unsigned bits_ = 0;
  std::size_t size_ = 0;
  std::size_t failed_bytes_ = 0;
  int failed_errno_ = 0;
};

}  // namespace runsel::trace

#endif
