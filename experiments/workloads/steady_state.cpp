// Steady state (AWSY base-like): start-up churns through far more memory than it
// keeps (parsing, compiling, layout of the UI), leaving a small live set of long-lived
// objects scattered over runs that were filled at the peak; then the idle browser
// keeps churning a little around that live set. AWSY "base" measures resident memory
// in that state, so what matters is how much of the peak the allocator gives back
// and whether steady churn refills the old holes or spreads into fresh runs.
#include <cstdio>

#include "workload.h"

namespace {

using workload::Block;
using workload::BlockArray;
using workload::Heap;
using workload::Rng;

constexpr size_t kStartupObjects = 400000;
constexpr size_t kSteadyRounds = 8;

size_t object_size(Rng& rng) {
  double pick = double(rng.below(1000)) / 1000.0;
  if (pick < 0.80) return rng.log_uniform(16, 256);
  if (pick < 0.97) return rng.between(257, 2048);
  if (pick < 0.995) return rng.between(2049, 3840);
  return rng.log_uniform(4096, 64 << 10);  // large: buffers, script sources
}

}  // namespace

int main(int argc, char** argv) {
  workload::Options options = workload::parse_options(argc, argv, "steady_state");
  workload::Recorder recorder("steady_state", options);
  Heap heap;
  Rng rng(options.seed);
  size_t startup = workload::scaled(options, kStartupObjects, 1000);

  auto work = [&] {
    BlockArray survivors(heap), transient(heap);
    // Start-up: 5 % of objects live on; the rest die in batches, in random order.
    for (size_t i = 0; i < startup; ++i) {
      size_t size = object_size(rng);
      Block block{heap.allocate(size), size};
      if (rng.chance(0.05))
        survivors.push(block);
      else
        transient.push(block);
      if (transient.size() > startup / 3) {  // a phase ends: half of its garbage goes
        for (size_t n = transient.size() / 2; n > 0; --n) {
          Block dead = transient.take(rng.below(transient.size()));
          heap.release(dead.address, dead.size);
        }
      }
    }
    recorder.checkpoint("startup_peak", heap, true);
    transient.release_all();
    recorder.checkpoint("startup_settled", heap, true);
    // Idle: each round replaces a tenth of the survivors and makes short-lived garbage.
    char name[40];
    for (size_t round = 1; round <= kSteadyRounds; ++round) {
      for (size_t n = survivors.size() / 10; n > 0; --n) {
        Block old = survivors.take(rng.below(survivors.size()));
        heap.release(old.address, old.size);
        size_t size = object_size(rng);
        survivors.push(Block{heap.allocate(size), size});
      }
      BlockArray garbage(heap);
      for (size_t n = startup / 20; n > 0; --n) {
        size_t size = rng.log_uniform(16, 512);
        garbage.push(Block{heap.allocate(size), size});
      }
      garbage.release_all();
      std::snprintf(name, sizeof name, "steady_%zu", round);
      recorder.checkpoint(name, heap, round == kSteadyRounds);
    }
    survivors.release_all();
  };
  recorder.begin(heap);
  workload::run_measured(work);
  return recorder.finish(heap, "start-up churn to a peak, then a 5 % live set with idle churn");
}
