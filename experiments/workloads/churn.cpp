// Short-lived churn (Speedometer-like): Speedometer's TodoMVC-style apps add a
// hundred-odd items, edit, complete and delete them, render, then tear the app down,
// over and over. Every object dies young and the live set stays small, so this
// workload measures the speed of malloc/free (and of refilling runs); resident
// memory barely moves. One round, half-way, is caught open ("app_open").
#include <cstdio>

#include "workload.h"

namespace {

using workload::Block;
using workload::BlockArray;
using workload::Heap;
using workload::Rng;

constexpr size_t kIterations = 600;

struct Item {
  Block record;  // the item object (64-160 bytes)
  Block title;   // its text (16-200 bytes)
  Block tags;    // a small array grown with realloc
};

void add_item(Heap& heap, Rng& rng, Item* items, size_t& count) {
  Item& item = items[count++];
  size_t record = rng.between(64, 160), title = rng.log_uniform(16, 200);
  item.record = Block{heap.allocate(record), record};
  item.title = Block{heap.allocate(title), title};
  item.tags = Block{heap.allocate(16), 16};
  for (size_t tags = rng.below(4); tags > 0; --tags) {
    item.tags.address = heap.resize(item.tags.address, item.tags.size, item.tags.size * 2);
    item.tags.size *= 2;
  }
}

void remove_item(Heap& heap, Item* items, size_t& count, size_t index) {
  Item& item = items[index];
  heap.release(item.record.address, item.record.size);
  heap.release(item.title.address, item.title.size);
  heap.release(item.tags.address, item.tags.size);
  items[index] = items[--count];
}

// One round of the app: build, edit, render, delete, tear down. With a recorder, a
// checkpoint is taken while the app is open (after its first edit pass).
void run_app(Heap& heap, Rng& rng, workload::Recorder* recorder) {
  size_t capacity = 1200, count = 0;
  auto* items = static_cast<Item*>(heap.allocate(capacity * sizeof(Item)));
  size_t wanted = rng.between(100, 800);
  while (count < wanted) add_item(heap, rng, items, count);
  for (size_t pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < count; ++i) {  // rename a fifth: a new title string
      if (!rng.chance(0.2)) continue;
      size_t size = rng.log_uniform(16, 200);
      items[i].title.address = heap.resize(items[i].title.address, items[i].title.size, size);
      items[i].title.size = size;
    }
    for (size_t i = 0; i < count;) {  // delete the completed
      if (rng.chance(0.3))
        remove_item(heap, items, count, i);
      else
        ++i;
    }
    for (size_t added = count / 4; added > 0 && count < capacity; --added)
      add_item(heap, rng, items, count);
    // Render: temporary strings and virtual-DOM nodes, all freed at once.
    BlockArray rendered(heap);
    for (size_t i = 0; i < count; ++i) {
      size_t node = rng.between(32, 256);
      rendered.push(Block{heap.allocate(node), node});
    }
    rendered.release_all();
    if (recorder != nullptr && pass == 0) recorder->checkpoint("app_open", heap, true);
  }
  while (count > 0) remove_item(heap, items, count, rng.below(count));
  heap.release_storage(items, capacity * sizeof(Item));
}

}  // namespace

int main(int argc, char** argv) {
  workload::Options options = workload::parse_options(argc, argv, "churn");
  workload::Recorder recorder("churn", options);
  Heap heap;
  Rng rng(options.seed);
  size_t iterations = workload::scaled(options, kIterations, 4);

  auto work = [&] {
    char name[40];
    for (size_t i = 1; i <= iterations; ++i) {
      run_app(heap, rng, i == iterations / 2 ? &recorder : nullptr);
      if (i % (iterations / 4) == 0 && i != iterations) {
        std::snprintf(name, sizeof name, "round_%zu", i);
        recorder.checkpoint(name, heap, false);
      }
    }
  };
  recorder.begin(heap);
  workload::run_measured(work);
  return recorder.finish(heap, "build, edit, render and destroy an app, repeatedly");
}
