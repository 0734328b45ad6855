// Sweep (garbage-collector-like): a mark-and-sweep heap allocates many small objects,
// then a collection frees a large random fraction of them, scattered over every run,
// and allocation resumes into the holes. That leaves many partially full runs in
// every bin, which is exactly where the choice of the next run decides how packed
// the heap stays and how many runs can drain.
#include <cstdio>

#include "workload.h"

namespace {

using workload::Block;
using workload::BlockArray;
using workload::Heap;
using workload::Rng;

constexpr size_t kCycles = 5;
constexpr size_t kObjectsPerCycle = 250000;

// GC-heap-like sizes: mostly small cells, some medium, a few big ones.
size_t object_size(Rng& rng) {
  double pick = double(rng.below(1000)) / 1000.0;
  if (pick < 0.70) return rng.log_uniform(16, 128);
  if (pick < 0.95) return rng.between(129, 512);
  return rng.log_uniform(513, 3840);
}

}  // namespace

int main(int argc, char** argv) {
  workload::Options options = workload::parse_options(argc, argv, "sweep");
  workload::Recorder recorder("sweep", options);
  Heap heap;
  Rng rng(options.seed);
  size_t objects = workload::scaled(options, kObjectsPerCycle, 1000);

  auto work = [&] {
    BlockArray live(heap);
    char name[40];
    for (size_t cycle = 1; cycle <= kCycles; ++cycle) {
      for (size_t i = 0; i < objects; ++i) {
        size_t size = object_size(rng);
        live.push(Block{heap.allocate(size), size});
      }
      std::snprintf(name, sizeof name, "allocated_%zu", cycle);
      recorder.checkpoint(name, heap, false);
      // The collection: 60-85 % of everything dies, wherever it is.
      double dying = 0.60 + 0.05 * double(rng.below(6));
      for (size_t i = 0; i < live.size();) {
        if (rng.chance(dying)) {
          Block dead = live.take(i);
          heap.release(dead.address, dead.size);
        } else {
          ++i;
        }
      }
      std::snprintf(name, sizeof name, "swept_%zu", cycle);
      recorder.checkpoint(name, heap, cycle == 1 || cycle == kCycles);
    }
    live.release_all();
  };
  recorder.begin(heap);
  workload::run_measured(work);
  return recorder.finish(heap, "allocate, sweep 60-85 % at random, allocate again");
}
