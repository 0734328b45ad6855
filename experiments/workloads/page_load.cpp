// Page load and tab close (AWSY tp6-like): tabs open one after another, each building
// a document: DOM-node-sized objects, strings, child arrays grown with realloc, hash
// tables that rehash into bigger ones, parse temporaries, a few image-sized large and
// huge buffers, and a few survivors that move into long-lived caches. Earlier tabs keep
// mutating while later ones load. Then the tabs close in random order. Resident
// memory is recorded after every load and every close; what stays after the last
// close is what the survivors pin.
#include <cstdio>
#include <vector>

#include "workload.h"

namespace {

using workload::Block;
using workload::BlockArray;
using workload::Heap;
using workload::Rng;

constexpr size_t kTabs = 6;
constexpr size_t kNodesPerTab = 30000;

struct Document {
  Heap& heap;
  Rng& rng;
  BlockArray& cache;  // long-lived: outlives every tab
  BlockArray objects;
  BlockArray temporaries;

  Document(Heap& heap, Rng& rng, BlockArray& cache)
      : heap(heap), rng(rng), cache(cache), objects(heap), temporaries(heap) {}

  void keep(size_t size) {
    Block block{heap.allocate(size), size};
    // A few objects are referenced from global caches (style sheets, fonts, atoms).
    if (rng.chance(0.03))
      cache.push(block);
    else
      objects.push(block);
  }

  // Parse temporaries: a short ring, the oldest freed as new ones arrive.
  void temporary(size_t size) {
    temporaries.push(Block{heap.allocate(size), size});
    if (temporaries.size() > 256) {
      Block oldest = temporaries.take(rng.below(64));
      heap.release(oldest.address, oldest.size);
    }
  }

  // A child list grown by doubling with realloc, from 16 bytes to `final_size`.
  void grown_array(size_t final_size) {
    size_t size = 16;
    void* array = heap.allocate(size);
    while (size < final_size) {
      array = heap.resize(array, size, size * 2);
      size *= 2;
    }
    objects.push(Block{array, size});
  }

  // A hash table that rehashes: each bigger table replaces the old one.
  void hash_table(size_t final_size) {
    size_t size = 512;
    void* table = heap.allocate_zeroed(size / 8, 8);
    while (size < final_size) {
      void* bigger = heap.allocate_zeroed(size * 2 / 8, 8);
      heap.release(table, size);
      table = bigger;
      size *= 2;
    }
    objects.push(Block{table, size});
  }

  void load(size_t nodes) {
    for (size_t node = 0; node < nodes; ++node) {
      keep(rng.between(48, 256));                                        // element
      if (rng.chance(0.6)) keep(rng.log_uniform(16, 512));               // text, attributes
      if (rng.chance(0.02)) keep(rng.between(512, 4096));                // long text
      if (rng.chance(0.5)) temporary(rng.log_uniform(16, 1024));         // parser, tokens
      if (node % 64 == 0) grown_array(size_t(1) << rng.between(6, 14));  // child lists
      if (node % 2048 == 0) hash_table(size_t(1) << rng.between(12, 16));
    }
    size_t images = rng.between(3, 8);
    for (size_t i = 0; i < images; ++i) keep(rng.log_uniform(16 << 10, 512 << 10));
    size_t huge = rng.between(0, 2);
    for (size_t i = 0; i < huge; ++i) keep(rng.between(1 << 20, 6 << 20));
    while (temporaries.size() > 0) {
      Block block = temporaries.take(temporaries.size() - 1);
      heap.release(block.address, block.size);
    }
  }

  // Script in a loaded tab: replace a tenth of its small objects.
  void mutate() {
    size_t changes = objects.size() / 10;
    for (size_t i = 0; i < changes; ++i) {
      size_t index = rng.below(objects.size());
      if (objects[index].size > 4096) continue;
      Block old = objects.take(index);
      heap.release(old.address, old.size);
      keep(rng.log_uniform(16, 512));
    }
  }

  void close() {
    objects.release_all();
    temporaries.release_all();
  }
};

}  // namespace

int main(int argc, char** argv) {
  workload::Options options = workload::parse_options(argc, argv, "page_load");
  workload::Recorder recorder("page_load", options);
  Heap heap;
  Rng rng(options.seed);
  size_t nodes = workload::scaled(options, kNodesPerTab, 100);

  auto work = [&] {
    BlockArray cache(heap);
    std::vector<Document*> tabs;  // the workload's own tiny bookkeeping
    tabs.reserve(kTabs);
    char name[40];
    for (size_t tab = 0; tab < kTabs; ++tab) {
      tabs.push_back(new Document(heap, rng, cache));
      tabs.back()->load(nodes);
      for (size_t other = 0; other < tab; ++other) tabs[other]->mutate();
      std::snprintf(name, sizeof name, "tab_%zu_loaded", tab + 1);
      recorder.checkpoint(name, heap, tab + 1 == kTabs);
    }
    for (size_t closed = 1; !tabs.empty(); ++closed) {
      size_t index = rng.below(tabs.size());
      tabs[index]->close();
      delete tabs[index];
      tabs.erase(tabs.begin() + long(index));
      std::snprintf(name, sizeof name, "tab_closed_%zu", closed);
      recorder.checkpoint(name, heap, tabs.empty());
    }
    // Memory pressure: the caches drop half their entries.
    for (size_t dropped = cache.size() / 2; dropped > 0; --dropped) {
      Block block = cache.take(rng.below(cache.size()));
      heap.release(block.address, block.size);
    }
    recorder.checkpoint("caches_trimmed", heap, true);
    cache.release_all();
  };
  recorder.begin(heap);
  workload::run_measured(work);
  return recorder.finish(heap, "6 tabs load, then close in random order");
}
