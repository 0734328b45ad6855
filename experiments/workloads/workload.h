// What every workload shares: seeded randomness, a heap that counts live requested
// bytes, and the Recorder that times the measured region, takes checkpoints (resident
// memory, live bytes, minor faults, runsel's stats and chunk maps when runsel serves
// malloc) and prints the run as one JSON document.
//
// Workloads call only the standard malloc API; runsel's introspection is looked up
// with dlsym, so the same binary runs under glibc, jemalloc, mimalloc, tcmalloc and
// every runsel variant through LD_PRELOAD.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "runsel.h"

namespace workload {

// --- command line -------------------------------------------------------------------

struct Options {
  uint64_t seed = 1;
  double scale = 1.0;         // multiplies every count; sizes stay the same
  bool introspect = true;     // --no-introspection: no runsel stats or maps (instruction counts)
  const char* out = nullptr;  // --out PATH, default stdout
};

// Parses --seed N --scale X --no-introspection --out PATH; exits with usage on error.
Options parse_options(int argc, char** argv, const char* workload_name);

// count × scale, at least `minimum`.
size_t scaled(const Options& options, size_t count, size_t minimum = 1);

// --- randomness: splitmix64, identical on every machine ------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t bound) { return bound ? size_t(next() % bound) : 0; }
  size_t between(size_t low, size_t high) { return low + below(high - low + 1); }  // inclusive
  bool chance(double probability) { return double(next() >> 11) * 0x1.0p-53 < probability; }
  // Skewed toward `low`: log-uniform between low and high (most objects are small).
  size_t log_uniform(size_t low, size_t high);

 private:
  uint64_t state_;
};

// --- the heap: malloc API plus live requested bytes ----------------------------------

// Every block is written when allocated (a real program initialises what it
// allocates, and only touched pages are resident) and its first byte is read back
// when freed, into a checksum that is the same under every allocator.
class Heap {
 public:
  void* allocate(size_t size);
  void* allocate_zeroed(size_t count, size_t size);
  void* resize(void* block, size_t old_size, size_t new_size);  // realloc, contents kept
  void release(void* block, size_t size);
  // For blocks that hold pointers (arrays of blocks): not read into the checksum,
  // whose value must not depend on addresses.
  void release_storage(void* block, size_t size);
  // For a caller that makes its own malloc calls (the trace replay): `size` bytes
  // became live, or stopped being live (`checked` goes into the checksum).
  void count_allocated(size_t size) { live_.fetch_add(size, std::memory_order_relaxed); }
  void count_freed(size_t size, uint64_t checked) {
    live_.fetch_sub(size, std::memory_order_relaxed);
    checksum_.fetch_add(checked, std::memory_order_relaxed);
  }
  size_t live_bytes() const { return live_.load(std::memory_order_relaxed); }
  uint64_t checksum() const { return checksum_.load(std::memory_order_relaxed); }

 private:
  std::atomic<size_t> live_{0};
  std::atomic<uint64_t> checksum_{0};
};

// A block and the size it was requested with.
struct Block {
  void* address;
  size_t size;
};

// A growable array of blocks that lives in the Heap: grown with realloc by doubling,
// as programs grow their own vectors, and counted in the live bytes.
class BlockArray {
 public:
  explicit BlockArray(Heap& heap) : heap_(&heap) {}
  BlockArray(BlockArray&& other) noexcept
      : heap_(other.heap_), items_(other.items_), size_(other.size_), capacity_(other.capacity_) {
    other.items_ = nullptr;
    other.size_ = other.capacity_ = 0;
  }
  BlockArray(const BlockArray&) = delete;
  BlockArray& operator=(const BlockArray&) = delete;
  ~BlockArray() { heap_->release_storage(items_, capacity_ * sizeof(Block)); }

  void push(Block block) {
    if (size_ == capacity_) {
      size_t grown = capacity_ ? capacity_ * 2 : 16;
      items_ = static_cast<Block*>(
          heap_->resize(items_, capacity_ * sizeof(Block), grown * sizeof(Block)));
      capacity_ = grown;
    }
    items_[size_++] = block;
  }
  Block& operator[](size_t index) { return items_[index]; }
  size_t size() const { return size_; }
  // Removes block `index` by moving the last one into its place.
  Block take(size_t index) {
    Block block = items_[index];
    items_[index] = items_[--size_];
    return block;
  }
  // Releases every block (in array order) and the array itself.
  void release_all() {
    for (size_t i = 0; i < size_; ++i) heap_->release(items_[i].address, items_[i].size);
    heap_->release_storage(items_, capacity_ * sizeof(Block));
    items_ = nullptr;
    size_ = capacity_ = 0;
  }

 private:
  Heap* heap_;
  Block* items_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

// --- the recorder --------------------------------------------------------------------

class Recorder {
 public:
  Recorder(const char* workload_name, const Options& options);
  // Starts the measured region's clock (takes the "start" checkpoint first).
  void begin(const Heap& heap);
  // A named checkpoint; its own cost is excluded from the measured time. With
  // `chunk_maps`, runsel's page occupancy is saved too (when runsel serves malloc).
  void checkpoint(const char* name, const Heap& heap, bool chunk_maps = false);
  // Stops the clock, takes the "end" checkpoint and writes the JSON document.
  // `deterministic`: every allocator sees the same call sequence (single thread).
  // Returns the process exit code.
  // `extra`: more top-level JSON members ("\"name\": value, ..."), written as given.
  int finish(const Heap& heap, const char* notes, bool deterministic = true,
             const char* extra = nullptr);

 private:
  struct Impl;
  Impl* impl_;
};

// Called around the measured work so callgrind can count only it:
// valgrind --tool=callgrind --collect-atstart=no --toggle-collect='workload_measured*'
extern "C" void workload_measured_region(void (*work)(void*), void* context);
extern "C" void workload_measured_worker(void (*work)(void*), void* context);

// Runs `work()` inside workload_measured_region (or _worker, on other threads).
template <class Work>
void run_measured(Work& work) {
  workload_measured_region([](void* context) { (*static_cast<Work*>(context))(); }, &work);
}
template <class Work>
void run_measured_worker(Work& work) {
  workload_measured_worker([](void* context) { (*static_cast<Work*>(context))(); }, &work);
}

}  // namespace workload
