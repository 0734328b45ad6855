// One deterministic allocation sequence (seeded: mixed sizes, random frees,
// reallocs, a sweep that leaves many runs partly full), built once per
// container as same_choices_<container>. It prints a digest of every address
// it was given and of the final runsel_stats(); compare_same_choices.py
// checks that rb_first, array_heap and pairing_heap, which all pick the
// lowest-addressed run, print the same digest, and that lifo does not.
//
// Addresses are digested relative to the chunk of the first allocation, so
// where the kernel put the mappings does not matter, only the allocator's
// choices. RUNSEL_SAME_CHOICES_LOG=<path> also writes every operation with
// its raw address and every stats figure, one per line, for diffing.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "runsel.h"
#include "support/seeds.h"

namespace {

constexpr size_t kChunk = size_t{1} << 20;
constexpr size_t kSlots = 16384;

// splitmix64 (support/seeds.h): the same sequence on every platform and library.
using runsel_test::Random;

// Browser-like sizes: mostly small, some large, a few huge.
size_t pick_size(Random& random) {
  const size_t dice = random.below(1000);
  if (dice < 450) return random.between(1, 64);
  if (dice < 650) return random.between(65, 128);
  if (dice < 850) return random.between(129, 512);
  if (dice < 950) return random.between(513, 3840);
  if (dice < 990) return random.between(4097, 32768);
  if (dice < 999) return random.between(32769, 262144);
  return random.between(kChunk, 2 * kChunk);
}

struct Slot {
  unsigned char* block = nullptr;
  size_t size = 0;
  uint64_t tag = 0;
};

// FNV-1a, 64 bits.
struct Digest {
  uint64_t value = 0xCBF29CE484222325ull;
  void add(uint64_t word) {
    for (int i = 0; i < 8; ++i) {
      value ^= (word >> (8 * i)) & 0xFF;
      value *= 0x100000001B3ull;
    }
  }
};

enum Op : uint64_t { kMalloc = 1, kRealloc = 2, kFree = 3 };

struct Record {
  uint64_t op, slot, size;
  uintptr_t address;
};

class Sequence {
 public:
  explicit Sequence(uint64_t seed) : random_{seed} {
    slots_.resize(kSlots);
    records_.reserve(600'000);
  }

  void run() {
    churn(120'000, 80, 0);   // build up a live set
    sweep(60);               // free 60 %: many runs partly full
    churn(150'000, 50, 15);  // the choices matter here
    sweep(90);               // most of it goes away
    churn(60'000, 55, 10);   // and comes back in the holes
  }

  const std::vector<Record>& records() const { return records_; }
  size_t live() const {
    size_t count = 0;
    for (const Slot& slot : slots_) count += slot.block != nullptr;
    return count;
  }

 private:
  // `steps` operations on random slots: allocate into an empty slot with
  // probability alloc_percent, realloc a live one with realloc_percent.
  void churn(size_t steps, size_t alloc_percent, size_t realloc_percent) {
    for (size_t i = 0; i < steps; ++i) {
      Slot& slot = slots_[random_.below(kSlots)];
      const size_t dice = random_.below(100);
      if (slot.block == nullptr) {
        if (dice < alloc_percent) allocate(slot);
      } else if (dice < realloc_percent) {
        resize(slot);
      } else if (dice >= alloc_percent) {
        release(slot);
      }
    }
  }

  void sweep(size_t percent) {
    for (Slot& slot : slots_) {
      if (slot.block != nullptr && random_.below(100) < percent) release(slot);
    }
  }

  void allocate(Slot& slot) {
    const size_t size = pick_size(random_);
    void* block = malloc(size);
    if (block == nullptr) fail("malloc returned NULL");
    slot.block = static_cast<unsigned char*>(block);
    slot.size = size;
    slot.tag = random_.next();
    stamp(slot);
    note(kMalloc, slot);
  }

  void resize(Slot& slot) {
    verify(slot);
    const size_t size = random_.below(2) == 0 ? pick_size(random_)
                                              : slot.size / 2 + random_.below(2 * slot.size + 1);
    const size_t kept = size < slot.size ? size : slot.size;
    // The tag survives in the bytes realloc must preserve.
    void* block = realloc(slot.block, size == 0 ? 1 : size);
    if (block == nullptr) fail("realloc returned NULL");
    slot.block = static_cast<unsigned char*>(block);
    slot.size = size == 0 ? 1 : size;
    if (kept >= sizeof(slot.tag)) {
      verify_prefix(slot);
    }
    stamp(slot);
    note(kRealloc, slot);
  }

  void release(Slot& slot) {
    verify(slot);
    note(kFree, slot);
    free(slot.block);
    slot.block = nullptr;
    slot.size = 0;
  }

  // The tag goes at the start and, past it, its low byte at the end:
  // overlapping blocks would overwrite one or the other.
  static void stamp(const Slot& slot) {
    const size_t head = slot.size < sizeof(slot.tag) ? slot.size : sizeof(slot.tag);
    memcpy(slot.block, &slot.tag, head);
    if (slot.size > head) slot.block[slot.size - 1] = static_cast<unsigned char>(slot.tag);
  }
  static void verify_prefix(const Slot& slot) {
    if (memcmp(slot.block, &slot.tag, sizeof(slot.tag)) != 0) fail("realloc lost the contents");
  }
  static void verify(const Slot& slot) {
    const size_t head = slot.size < sizeof(slot.tag) ? slot.size : sizeof(slot.tag);
    if (memcmp(slot.block, &slot.tag, head) != 0 ||
        (slot.size > head && slot.block[slot.size - 1] != static_cast<unsigned char>(slot.tag))) {
      fail("a block's contents changed: overlapping allocations");
    }
  }

  void note(uint64_t op, const Slot& slot) {
    records_.push_back(Record{op, static_cast<uint64_t>(&slot - slots_.data()), slot.size,
                              reinterpret_cast<uintptr_t>(slot.block)});
  }

  [[noreturn]] static void fail(const char* what) {
    fprintf(stderr, "same_choices: %s\n", what);
    exit(2);
  }

  Random random_;
  std::vector<Slot> slots_;
  std::vector<Record> records_;
};

// Figures that depend only on the heap, and those that also count the
// allocator's own metadata (array_heap's side arrays live there).
void print_stats(FILE* out, const runsel_stats_t& s) {
  Digest bins;
  for (const runsel_bin_stats& bin : s.bins) {
    for (size_t figure : {bin.size, bin.runs, bin.nonfull_runs, bin.regions_per_run,
                          bin.bytes_per_run, bin.unused_bytes, bin.regions_in_use}) {
      bins.add(figure);
    }
  }
  fprintf(out,
          "heap allocated=%zu waste=%zu dirty=%zu bin_unused=%zu small=%zu large=%zu huge=%zu "
          "chunks=%zu huge_count=%zu nmalloc=%zu nfree=%zu purges=%zu "
          "committed-bookkeeping=%zu bins=%016llx\n",
          s.allocated, s.waste, s.dirty, s.bin_unused, s.small_allocated, s.large_allocated,
          s.huge_allocated, s.chunks, s.huge_count, s.nmalloc, s.nfree, s.purges,
          s.committed - s.bookkeeping, static_cast<unsigned long long>(bins.value));
  fprintf(out, "metadata mapped=%zu committed=%zu bookkeeping=%zu\n", s.mapped, s.committed,
          s.bookkeeping);
}

void write_log(const char* path, const std::vector<Record>& records, const runsel_stats_t& s) {
  FILE* out = fopen(path, "w");
  if (out == nullptr) {
    perror(path);
    exit(2);
  }
  static const char* const kOpNames[] = {"", "malloc", "realloc", "free"};
  for (const Record& r : records) {
    fprintf(out, "%s slot=%llu size=%llu address=%#llx\n", kOpNames[r.op],
            static_cast<unsigned long long>(r.slot), static_cast<unsigned long long>(r.size),
            static_cast<unsigned long long>(r.address));
  }
  print_stats(out, s);
  for (size_t b = 0; b < s.bin_count; ++b) {
    const runsel_bin_stats& bin = s.bins[b];
    fprintf(out, "bin size=%zu runs=%zu nonfull=%zu unused=%zu in_use=%zu\n", bin.size, bin.runs,
            bin.nonfull_runs, bin.unused_bytes, bin.regions_in_use);
  }
  fclose(out);
}

}  // namespace

// Before the random sequence: the case where mozjemalloc's current-run rule
// (moz_tree) picks a run the lowest-address containers would not, which a
// random sequence rarely reaches (its current run seldom empties). In an
// unused class of one-page runs, four whole runs w < x < y < z are filled;
// a region of w is freed (w, the lowest, becomes current), then one of y (y
// joins the tree), then the rest of w (w empties: no current run), then one
// of z (with no current run it becomes current whatever its address); the
// next allocation goes to z under moz_tree, to y under rb_first. Returns the
// allocations and frees it made, every block freed again at the end.
std::vector<Record> current_run_case() {
  std::vector<Record> records;
  runsel_stats_t stats;
  runsel_stats(&stats);
  size_t size = 0, per_run = 0;
  for (const runsel_bin_stats& bin : stats.bins) {
    if (bin.size >= 64 && bin.runs == 0 && bin.bytes_per_run == 4096) {
      size = bin.size;
      per_run = bin.regions_per_run;
      break;
    }
  }
  if (size == 0) return records;
  auto page = [](const void* p) { return reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095}; };
  auto take = [&](std::vector<void*>& into) {
    void* block = malloc(size);
    if (block == nullptr) return;
    into.push_back(block);
    records.push_back({kMalloc, 0, size, reinterpret_cast<uintptr_t>(block)});
  };
  auto give = [&](void* block) {
    records.push_back({kFree, 0, size, reinterpret_cast<uintptr_t>(block)});
    free(block);
  };
  std::vector<void*> blocks;
  for (size_t i = 0; i < 6 * per_run; ++i) take(blocks);
  // Whole runs (every region ours), by address.
  std::vector<std::vector<void*>> runs;
  for (void* block : blocks) {
    if (runs.empty() || page(runs.back().front()) != page(block)) runs.emplace_back();
    runs.back().push_back(block);
  }
  std::vector<std::vector<void*>> whole;
  for (auto& run : runs) {
    if (run.size() == per_run) whole.push_back(run);
  }
  std::sort(whole.begin(), whole.end(),
            [&](const auto& a, const auto& b) { return page(a.front()) < page(b.front()); });
  if (whole.size() < 4) return records;
  std::vector<void*>& w = whole[0];
  give(w.back());
  w.pop_back();
  give(whole[2].back());
  whole[2].pop_back();
  while (!w.empty()) {
    give(w.back());
    w.pop_back();
  }
  give(whole[3].back());
  whole[3].pop_back();
  std::vector<void*> after;
  take(after);
  for (auto& run : whole) {
    for (void* block : run) give(block);
  }
  for (auto& run : runs) {
    if (run.size() != per_run) {
      for (void* block : run) give(block);
    }
  }
  for (void* block : after) give(block);
  return records;
}

int main() {
  std::vector<Record> records = current_run_case();
  Sequence sequence(20240601);
  sequence.run();
  records.insert(records.end(), sequence.records().begin(), sequence.records().end());
  const uintptr_t base = records.front().address & ~(kChunk - 1);
  Digest addresses;
  for (const Record& r : records) {
    addresses.add(r.op);
    addresses.add(r.slot);
    addresses.add(r.size);
    addresses.add(static_cast<uint64_t>(r.address - base));  // wraps for lower chunks: fine
  }

  runsel_stats_t stats;
  runsel_stats(&stats);
  const int consistent = runsel_check();

  printf("variant %s\n", runsel_variant());
  printf("operations %zu live %zu\n", records.size(), sequence.live());
  printf("addresses %016llx\n", static_cast<unsigned long long>(addresses.value));
  print_stats(stdout, stats);
  printf("check %s\n", consistent == 0 ? "ok" : "FAILED");
  if (const char* path = getenv("RUNSEL_SAME_CHOICES_LOG")) write_log(path, records, stats);
  return consistent == 0 ? 0 : 1;
}
