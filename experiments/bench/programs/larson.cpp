// A larson-style server: each epoch starts fresh threads, and each thread
// takes over the block array a thread of the previous epoch left (so most of
// its frees are of blocks another thread allocated), replacing random slots
// with blocks of random size (8-1,000 B, uniform, as in larson's usual
// setting). --sized frees through sized operator delete, as C++ servers do.
#include <new>
#include <thread>
#include <vector>

#include "program.h"

namespace {

using bench_program::Options;
using bench_program::Rng;

constexpr std::size_t kSlots = 2000;  // per thread
constexpr std::size_t kMinSize = 8, kMaxSize = 1000;

struct Slot {
  void* block = nullptr;
  std::size_t size = 0;
};

void release(const Slot& slot, bool sized) {
  bench_program::expect_stamp(slot.block, static_cast<std::uint8_t>(slot.size));
  if (sized) {
    ::operator delete(slot.block, slot.size);
  } else {
    ::operator delete(slot.block);
  }
}

Slot make(Rng& rng) {
  const std::size_t size = rng.between(kMinSize, kMaxSize);
  void* block = ::operator new(size);
  bench_program::stamp(block, size, static_cast<std::uint8_t>(size));
  return Slot{block, size};
}

void serve(std::vector<Slot>& slots, Rng rng, std::size_t operations, bool sized) {
  for (std::size_t i = 0; i < operations; ++i) {
    Slot& slot = slots[rng.below(slots.size())];
    release(slot, sized);
    slot = make(rng);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = bench_program::parse_options(argc, argv);
  const unsigned threads = options.threads ? options.threads : 4;
  const std::size_t epochs = 16;
  const std::size_t per_epoch = bench_program::scaled(options, 25000);
  Rng setup(options.seed);
  std::vector<std::vector<Slot>> arrays(threads, std::vector<Slot>(kSlots));
  for (auto& array : arrays)
    for (Slot& slot : array) slot = make(setup);

  bench_program::Stopwatch clock;
  for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
      // Thread t of this epoch serves the array thread t-1 served before.
      std::vector<Slot>& array = arrays[(t + epoch) % threads];
      Rng rng(options.seed * 1000003 + epoch * 131 + t);
      workers.emplace_back(serve, std::ref(array), rng, per_epoch, options.sized);
    }
    for (std::thread& worker : workers) worker.join();
  }
  const double seconds = clock.seconds();

  for (auto& array : arrays)
    for (Slot& slot : array) release(slot, options.sized);
  bench_program::report(options.sized ? "larson_sized" : "larson", options, seconds,
                        2 * epochs * per_epoch * threads, threads);
  return 0;
}
