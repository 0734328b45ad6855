// Non-full run containers in isolation: the four calls a bin makes, per
// container, at 4, 64, 1,024 and 16,384 non-full runs whose addresses arrive
// in random order. No allocator: the nodes are fake run headers, one per 4 KiB
// page like real runs (so each hook is on its own page, as in the heap).
//
//   pick              the pick for the next allocation
//   erase_when_full   erase(pick()): the run allocated from just filled
//   insert_when_freed insert of a run not in the set: a full run had one
//                     region freed
//   erase_when_empty  erase of a random member: its last region was freed
//   touched           touched(pick()): an allocation that did not fill the run
//                     (the pick's free count drops by one first)
//   touched_by_free   touched(run) of a random member whose free count just
//                     rose by one: a free that did not empty the run
//   fill_and_reopen   erase(pick()) then insert of an outsider, interleaved:
//                     a bin's steady state (the pick fills while frees reopen
//                     full runs anywhere); reported per pair of calls
//
// Each timed batch does one kind of call a few hundred times (the set's size
// stays within N -/+ half a batch) and an untimed step undoes it, so every
// batch starts from a similar set; the time reported is per call (manual
// time, one iteration per call). Small sets use many containers side by side
// so that a batch is long enough to time. Every run has 64 regions, and its
// free count (1 to 63 at first, 1 for a run reopened by a free) is what the
// occupancy containers order by; its serial number (the order the runs were
// created in, random against their addresses) sits apart from the header,
// 32 bytes per run, as in runsel's page map. See containers.md for how to run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "containers/hook.h"
#include "containers/list.h"

// Under callgrind (--collect-atstart=no), only the timed calls are counted,
// and the benchmark prints how many calls it timed in all (every trial the
// library ran), so one call's instructions and simulated misses are the
// totals divided by that. Outside valgrind the macros cost a few
// instructions outside the timed region.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define RUNSEL_BENCH_COLLECT() CALLGRIND_TOGGLE_COLLECT
#define RUNSEL_BENCH_UNDER_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#define RUNSEL_BENCH_DUMP(name) CALLGRIND_DUMP_STATS_AT(name)
#else
#define RUNSEL_BENCH_DUMP(name) \
  do {                          \
  } while (false)
#define RUNSEL_BENCH_COLLECT() \
  do {                         \
  } while (false)
#define RUNSEL_BENCH_UNDER_VALGRIND() false
#endif

namespace {

constexpr std::size_t kPage = 4096;

constexpr std::uint32_t kRegions = 64;

// Laid out like runsel's run header: the bin pointer, the hook, then the free
// count.
struct alignas(kPage) Node {
  void* bin = nullptr;
  runsel::ContainerHook<Node> hook{};
  std::uint32_t free_count = 1;
  char rest_of_run[kPage - sizeof(void*) - sizeof(runsel::ContainerHook<Node>) -
                   sizeof(std::uint32_t)];
};
static_assert(sizeof(Node) == kPage);

// What runsel keeps in the page map entry of a run's first page: the serial
// number, and with the hooks placed there (-Dhook_placement=page_map) the
// hook too; 32 bytes apart (40 with the hook), as in runsel's chunk header.
template <bool kHookInPageMap>
struct PageMapEntry;
template <>
struct PageMapEntry<false> {
  std::uint64_t serial;
  char rest[24];
};
template <>
struct PageMapEntry<true> {
  runsel::ContainerHook<Node> hook;
  std::uint64_t serial;
  std::uintptr_t bits;
};
static_assert(sizeof(PageMapEntry<false>) == 32 && sizeof(PageMapEntry<true>) == 40);

// The nodes sit in 1 MiB chunks laid out as runsel's: the chunk header (80
// bytes of fields, then the page map, one entry per page) fills the first
// three pages, a guard page follows, and pages 4 to 255 hold one node each.
// So a node's entry is found from its address alone, as runsel finds it.
constexpr std::size_t kChunk = std::size_t{1} << 20;
constexpr std::size_t kMapOffset = 80;
constexpr std::size_t kFirstNodePage = 4;
constexpr std::size_t kNodesPerChunk = kChunk / kPage - kFirstNodePage;

// The containers' traits (containers/container.h) for one hook placement.
template <bool kHookInPageMap>
struct NodeTraits {
  using Node = ::Node;
  using Entry = PageMapEntry<kHookInPageMap>;
  static Entry& entry(const Node* node) {
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(node);
    auto* map = reinterpret_cast<Entry*>((address & ~(kChunk - 1)) + kMapOffset);
    return map[(address & (kChunk - 1)) / kPage];
  }
  static runsel::ContainerHook<Node>& hook(Node* node) {
    if constexpr (kHookInPageMap) {
      return entry(node).hook;
    } else {
      return node->hook;
    }
  }
  // Every link is taken for a node of the set: the rows time the containers'
  // back-link checks, not runsel's lookup of a link (arena/run.h).
  static bool linked(const Node*, const Node*) { return true; }
  static std::uint32_t free_regions(const Node* node) { return node->free_count; }
  static std::uint32_t regions(const Node*) { return kRegions; }
  static std::uint64_t serial(const Node* node) { return entry(node).serial; }
  static void* allocate(std::size_t bytes) { return std::malloc(bytes); }
  static void release(void* p, std::size_t) { std::free(p); }
};

enum class Call {
  kPick,
  kEraseWhenFull,
  kInsertWhenFreed,
  kEraseWhenEmpty,
  kTouched,
  kTouchedByFree,
  kFillAndReopen
};

const char* name_of(Call call) {
  switch (call) {
    case Call::kPick:
      return "pick";
    case Call::kEraseWhenFull:
      return "erase_when_full";
    case Call::kInsertWhenFreed:
      return "insert_when_freed";
    case Call::kEraseWhenEmpty:
      return "erase_when_empty";
    case Call::kTouched:
      return "touched";
    case Call::kTouchedByFree:
      return "touched_by_free";
    case Call::kFillAndReopen:
      return "fill_and_reopen";
  }
  return "?";
}

constexpr std::size_t kBatchTarget = 512;

std::uint64_t g_timed_calls = 0;  // benchmark iterations timed, all trials

// K containers of n members each, plus for each a few outsiders to insert.
template <class Set, bool kHookInPageMap>
class Bins {
 public:
  explicit Bins(std::size_t n, std::uint64_t seed) : rng_(seed) {
    containers_ = n >= kBatchTarget ? 1 : kBatchTarget / n;
    per_container_ = std::max<std::size_t>(1, std::min(n / 2, kBatchTarget / containers_));
    const std::size_t total = containers_ * (n + per_container_);
    chunks_ = (total + kNodesPerChunk - 1) / kNodesPerChunk;
    memory_ = static_cast<char*>(std::aligned_alloc(kChunk, chunks_ * kChunk));
    std::memset(memory_, 0, chunks_ * kChunk);
    std::vector<Node*> order(total);
    for (std::size_t i = 0; i < total; ++i) {
      order[i] = new (memory_ + (i / kNodesPerChunk) * kChunk +
                      (kFirstNodePage + i % kNodesPerChunk) * kPage) Node();
      order[i]->free_count = random_free_count();
    }
    std::shuffle(order.begin(), order.end(), rng_);  // creation order, against addresses
    for (std::size_t i = 0; i < total; ++i) NodeTraits<kHookInPageMap>::entry(order[i]).serial = i;
    std::shuffle(order.begin(), order.end(), rng_);  // addresses in random order
    bins_.resize(containers_);
    std::size_t next = 0;
    for (Bin& bin : bins_) {
      for (std::size_t i = 0; i < n; ++i) {
        bin.members.push_back(order[next++]);
        bin.set.insert(bin.members.back());
      }
      for (std::size_t i = 0; i < per_container_; ++i) bin.outsiders.push_back(order[next++]);
      bin.set.pick();  // rb_root makes its first pick
    }
  }
  ~Bins() { std::free(memory_); }
  Bins(const Bins&) = delete;
  Bins& operator=(const Bins&) = delete;

  std::size_t batch() const { return containers_ * per_container_; }

  // One timed batch of `call` and its untimed undo; returns the seconds timed.
  double run_batch(Call call) {
    using Clock = std::chrono::steady_clock;
    prepare(call);
    const Clock::time_point start = Clock::now();
    RUNSEL_BENCH_COLLECT();
    switch (call) {
      case Call::kPick:
        for (std::size_t round = 0; round < per_container_; ++round) {
          for (Bin& bin : bins_) benchmark::DoNotOptimize(bin.set.pick());
        }
        break;
      case Call::kTouched:
        for (std::size_t round = 0; round < per_container_; ++round) {
          for (Bin& bin : bins_) {
            Node* run = bin.set.pick();
            if (run->free_count > 1) --run->free_count;
            bin.set.touched(run);
          }
        }
        break;
      case Call::kTouchedByFree:
        for (Bin& bin : bins_) {
          for (Node* run : bin.chosen) {
            ++run->free_count;
            bin.set.touched(run);
          }
        }
        break;
      case Call::kEraseWhenFull:
        for (Bin& bin : bins_) {
          for (std::size_t i = 0; i < per_container_; ++i) {
            Node* run = bin.set.pick();
            run->free_count = 0;  // it filled
            bin.set.erase(run);
            bin.chosen[i] = run;
          }
        }
        break;
      case Call::kFillAndReopen:
        for (Bin& bin : bins_) {
          for (Node*& outsider : bin.chosen) {
            Node* run = bin.set.pick();
            run->free_count = 0;  // it filled
            bin.set.erase(run);
            bin.set.insert(outsider);
            outsider = run;  // full now; a later free may reopen it
          }
        }
        break;
      case Call::kInsertWhenFreed:
      case Call::kEraseWhenEmpty:
        for (Bin& bin : bins_) {
          for (Node* run : bin.chosen) {
            if (call == Call::kInsertWhenFreed) {
              bin.set.insert(run);
            } else {
              bin.set.erase(run);
            }
          }
        }
        break;
    }
    RUNSEL_BENCH_COLLECT();
    const Clock::time_point stop = Clock::now();
    g_timed_calls += batch();
    undo(call);
    benchmark::ClobberMemory();
    return std::chrono::duration<double>(stop - start).count();
  }

 private:
  // A container has no destructor work; array_heap's side array (malloc
  // here) is simply left behind with it.
  struct Bin {
    Set set;
    std::vector<Node*> members;    // in the set between batches
    std::vector<Node*> outsiders;  // never in the set between batches
    std::vector<Node*> chosen;     // the runs this batch moves
  };

  std::uint32_t random_free_count() {
    return 1 + static_cast<std::uint32_t>(rng_() % (kRegions - 1));
  }

  // Picks, untimed, the runs the batch will move.
  void prepare(Call call) {
    for (Bin& bin : bins_) {
      bin.chosen.resize(per_container_);
      if (call == Call::kInsertWhenFreed || call == Call::kFillAndReopen) {
        std::shuffle(bin.outsiders.begin(), bin.outsiders.end(), rng_);
        std::copy(bin.outsiders.begin(), bin.outsiders.begin() + per_container_,
                  bin.chosen.begin());
        // A full run that had one region freed.
        for (Node* run : bin.chosen) run->free_count = 1;
      } else if (call == Call::kEraseWhenEmpty || call == Call::kTouchedByFree) {
        // Distinct random members: a partial Fisher-Yates over a copy.
        std::vector<Node*>& pool = scratch_;
        pool = bin.members;
        for (std::size_t i = 0; i < per_container_; ++i) {
          std::swap(pool[i], pool[i + rng_() % (pool.size() - i)]);
          bin.chosen[i] = pool[i];
        }
        // Its last region was freed (moz_tree tells an emptied run from a full one).
        if (call == Call::kEraseWhenEmpty) {
          for (Node* run : bin.chosen) run->free_count = kRegions;
        }
        // A free never empties the run here: at most 62 of 64 free after it.
        if (call == Call::kTouchedByFree) {
          for (Node* run : bin.chosen) {
            if (run->free_count <= kRegions - 2) continue;
            run->free_count = kRegions - 2;
            bin.set.touched(run);
          }
        }
      }
    }
  }

  // Puts every set back to its n members, untimed (membership never changes
  // between batches; the structure inside does).
  void undo(Call call) {
    for (Bin& bin : bins_) {
      switch (call) {
        case Call::kPick:
        case Call::kTouched:
          break;
        case Call::kTouchedByFree:
          // The regions are taken again.
          for (Node* run : bin.chosen) {
            --run->free_count;
            bin.set.touched(run);
          }
          break;
        case Call::kEraseWhenFull:
        case Call::kEraseWhenEmpty:
          // The runs come back in random order (frees land anywhere), with
          // some regions in use.
          std::shuffle(bin.chosen.begin(), bin.chosen.end(), rng_);
          for (Node* run : bin.chosen) {
            run->free_count = random_free_count();
            bin.set.insert(run);
          }
          break;
        case Call::kInsertWhenFreed:
          // The same runs leave again; members and outsiders are unchanged.
          for (Node* run : bin.chosen) bin.set.erase(run);
          break;
        case Call::kFillAndReopen:
          // Nothing to undo: the size is unchanged. The runs that filled
          // are the new outsiders (`members` goes stale; this benchmark's
          // Bins never uses it).
          bin.outsiders = bin.chosen;
          break;
      }
      benchmark::DoNotOptimize(bin.set.pick());  // rb_root picks again
    }
  }

  std::mt19937_64 rng_;
  std::size_t containers_ = 1;
  std::size_t per_container_ = 1;
  char* memory_ = nullptr;  // chunks_ chunks of nodes
  std::size_t chunks_ = 0;
  std::vector<Bin> bins_;
  std::vector<Node*> scratch_;
};

template <class Set, bool kHookInPageMap>
void measure(benchmark::State& state, Call call, const std::string& row) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Bins<Set, kHookInPageMap> bins(n, 0x5EED0000 + n);
  const std::size_t batch = bins.batch();
  const std::uint64_t calls_before = g_timed_calls;
  while (state.KeepRunningBatch(static_cast<benchmark::IterationCount>(batch))) {
    state.SetIterationTime(bins.run_batch(call));
  }
  state.counters["runs"] = static_cast<double>(n);
  // Under callgrind: this trial's counts in a dump of their own, named after
  // the benchmark, and the calls it timed, so that every row gets its own
  // figures from one valgrind run (sum the dumps and calls of each name).
  if (RUNSEL_BENCH_UNDER_VALGRIND()) {
    const std::string name = row + "/" + std::to_string(n);
    RUNSEL_BENCH_DUMP(name.c_str());
    std::fprintf(stderr, "container_bench: %s: %llu timed iterations\n", name.c_str(),
                 static_cast<unsigned long long>(g_timed_calls - calls_before));
  }
}

// One row per call for each container of containers/list.h.
// Each in both hook placements: `<container>/<call>` with the hook in the
// node (the run header), `<container>+page_map/<call>` with it in the page
// map entry.
template <class Entry, bool kHookInPageMap>
void register_container() {
  using Set = typename Entry::template Type<NodeTraits<kHookInPageMap>>;
  for (Call call :
       {Call::kPick, Call::kEraseWhenFull, Call::kInsertWhenFreed, Call::kEraseWhenEmpty,
        Call::kTouched, Call::kTouchedByFree, Call::kFillAndReopen}) {
    const std::string name =
        std::string(Entry::kName) + (kHookInPageMap ? "+page_map/" : "/") + name_of(call);
    benchmark::RegisterBenchmark(name.c_str(), measure<Set, kHookInPageMap>, call, name)
        ->Arg(4)
        ->Arg(64)
        ->Arg(1024)
        ->Arg(16384)
        ->UseManualTime();
  }
}

template <class... Entries>
void register_containers(runsel::ContainerList<Entries...>) {
  (register_container<Entries, false>(), ...);
  (register_container<Entries, true>(), ...);
}

}  // namespace

int main(int argc, char** argv) {
  register_containers(runsel::AllContainers{});
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (RUNSEL_BENCH_UNDER_VALGRIND()) {
    std::fprintf(stderr, "container_bench: %llu timed iterations\n",
                 static_cast<unsigned long long>(g_timed_calls));
  }
  return 0;
}
