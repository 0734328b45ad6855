// A multi-threaded stress with random lifetimes (in the spirit of mstress):
// phases of fresh threads share one table of slots; each operation picks a
// random slot and either puts a new block in it or empties it, freeing what
// was there, whichever thread allocated it. Sizes are mostly small, some
// page-sized, a few large. The live set grows and shrinks across phases: the
// table's active part changes size, and the main thread frees what lies
// beyond it between phases, so arenas that different phases used hold dirty
// pages while others fill.
#include <atomic>
#include <thread>
#include <vector>

#include "program.h"

namespace {

using bench_program::Options;
using bench_program::Rng;

constexpr std::size_t kSlots = 40000;
constexpr std::size_t kPhases = 12;

struct Table {
  std::vector<std::atomic<void*>> slots{kSlots};
};

std::size_t block_size(Rng& rng) {
  const std::size_t kind = rng.below(1000);
  if (kind < 900) return rng.log_uniform(16, 512);
  if (kind < 995) return rng.log_uniform(513, 16384);
  return rng.log_uniform(16385, 262144);
}

// A block carries its size in its first word, so any thread can check it.
void* make(Rng& rng) {
  const std::size_t size = block_size(rng);
  void* block = std::malloc(size);
  bench_program::stamp(block, size, 0x5a);
  static_cast<std::size_t*>(block)[0] = size;
  static_cast<std::uint8_t*>(block)[size - 1] = 0x5a;
  return block;
}

void release(void* block) {
  if (block == nullptr) return;
  const std::size_t size = static_cast<std::size_t*>(block)[0];
  bench_program::expect_stamp(static_cast<std::uint8_t*>(block) + size - 1, 0x5a);
  std::free(block);
}

void churn(Table& table, std::size_t active, Rng rng, std::size_t operations) {
  for (std::size_t i = 0; i < operations; ++i) {
    std::atomic<void*>& slot = table.slots[rng.below(active)];
    void* replacement = rng.below(8) < 5 ? make(rng) : nullptr;
    release(slot.exchange(replacement, std::memory_order_acq_rel));
  }
}

// The active part of the table in phase `phase`: 1/4, 2/4, 4/4, 3/4, 1/4, ...
std::size_t active_slots(std::size_t phase) {
  static constexpr std::size_t kQuarters[] = {1, 2, 4, 3, 1, 4};
  return kSlots / 4 * kQuarters[phase % 6];
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = bench_program::parse_options(argc, argv);
  const unsigned threads = options.threads ? options.threads : 4;
  const std::size_t per_phase = bench_program::scaled(options, 60000);  // per thread
  Table table;
  bench_program::Stopwatch clock;
  for (std::size_t phase = 0; phase < kPhases; ++phase) {
    const std::size_t active = active_slots(phase);
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back(churn, std::ref(table), active,
                           Rng(options.seed * 65537 + phase * 97 + t), per_phase);
    for (std::thread& worker : workers) worker.join();
    const std::size_t next = active_slots(phase + 1);
    for (std::size_t s = next; s < kSlots; ++s)
      release(table.slots[s].exchange(nullptr, std::memory_order_relaxed));
  }
  const double seconds = clock.seconds();
  for (auto& slot : table.slots) release(slot.load(std::memory_order_relaxed));
  bench_program::report("stress", options, seconds, kPhases * per_phase * threads, threads);
  return 0;
}
