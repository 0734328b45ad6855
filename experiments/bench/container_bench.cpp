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
//   fill_and_reopen   erase(pick()) then insert of an outsider, interleaved:
//                     a bin's steady state (the pick fills while frees reopen
//                     full runs anywhere); reported per pair of calls
//
// Each timed batch does one kind of call a few hundred times (the set's size
// stays within N -/+ half a batch) and an untimed step undoes it, so every
// batch starts from a similar set; the time reported is per call (manual
// time, one iteration per call). Small sets use many containers side by side
// so that a batch is long enough to time. See containers.md for how to run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "containers/hook.h"
#include "containers/list.h"

namespace {

constexpr std::size_t kPage = 4096;

// Laid out like runsel's run header: the bin pointer, then the hook.
struct alignas(kPage) Node {
  void* bin = nullptr;
  runsel::ContainerHook<Node> hook{};
  char rest_of_run[kPage - sizeof(void*) - sizeof(runsel::ContainerHook<Node>)];
};
static_assert(sizeof(Node) == kPage);

struct NodeHook {
  static runsel::ContainerHook<Node>& hook(Node* node) { return node->hook; }
};

struct MallocMetadata {
  static void* allocate(std::size_t bytes) { return std::malloc(bytes); }
  static void release(void* p, std::size_t bytes) {
    (void)bytes;
    std::free(p);
  }
};

enum class Call {
  kPick,
  kEraseWhenFull,
  kInsertWhenFreed,
  kEraseWhenEmpty,
  kTouched,
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
    case Call::kFillAndReopen:
      return "fill_and_reopen";
  }
  return "?";
}

constexpr std::size_t kBatchTarget = 512;

// K containers of n members each, plus for each a few outsiders to insert.
template <class Set>
class Bins {
 public:
  explicit Bins(std::size_t n, std::uint64_t seed) : rng_(seed) {
    containers_ = n >= kBatchTarget ? 1 : kBatchTarget / n;
    per_container_ = std::max<std::size_t>(1, std::min(n / 2, kBatchTarget / containers_));
    const std::size_t total = containers_ * (n + per_container_);
    nodes_ = static_cast<Node*>(std::aligned_alloc(kPage, total * sizeof(Node)));
    std::vector<Node*> order(total);
    for (std::size_t i = 0; i < total; ++i) order[i] = new (&nodes_[i]) Node();
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
  ~Bins() { std::free(nodes_); }
  Bins(const Bins&) = delete;
  Bins& operator=(const Bins&) = delete;

  std::size_t batch() const { return containers_ * per_container_; }

  // One timed batch of `call` and its untimed undo; returns the seconds timed.
  double run_batch(Call call) {
    using Clock = std::chrono::steady_clock;
    prepare(call);
    const Clock::time_point start = Clock::now();
    switch (call) {
      case Call::kPick:
        for (std::size_t round = 0; round < per_container_; ++round) {
          for (Bin& bin : bins_) benchmark::DoNotOptimize(bin.set.pick());
        }
        break;
      case Call::kTouched:
        for (std::size_t round = 0; round < per_container_; ++round) {
          for (Bin& bin : bins_) bin.set.touched(bin.set.pick());
        }
        break;
      case Call::kEraseWhenFull:
        for (Bin& bin : bins_) {
          for (std::size_t i = 0; i < per_container_; ++i) {
            Node* run = bin.set.pick();
            bin.set.erase(run);
            bin.chosen[i] = run;
          }
        }
        break;
      case Call::kFillAndReopen:
        for (Bin& bin : bins_) {
          for (Node*& outsider : bin.chosen) {
            Node* run = bin.set.pick();
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
    const Clock::time_point stop = Clock::now();
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

  // Picks, untimed, the runs the batch will move.
  void prepare(Call call) {
    for (Bin& bin : bins_) {
      bin.chosen.resize(per_container_);
      if (call == Call::kInsertWhenFreed || call == Call::kFillAndReopen) {
        std::shuffle(bin.outsiders.begin(), bin.outsiders.end(), rng_);
        std::copy(bin.outsiders.begin(), bin.outsiders.begin() + per_container_,
                  bin.chosen.begin());
      } else if (call == Call::kEraseWhenEmpty) {
        // Distinct random members: a partial Fisher-Yates over a copy.
        std::vector<Node*>& pool = scratch_;
        pool = bin.members;
        for (std::size_t i = 0; i < per_container_; ++i) {
          std::swap(pool[i], pool[i + rng_() % (pool.size() - i)]);
          bin.chosen[i] = pool[i];
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
        case Call::kEraseWhenFull:
        case Call::kEraseWhenEmpty:
          // The runs come back in random order (frees land anywhere).
          std::shuffle(bin.chosen.begin(), bin.chosen.end(), rng_);
          for (Node* run : bin.chosen) bin.set.insert(run);
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
  Node* nodes_ = nullptr;
  std::vector<Bin> bins_;
  std::vector<Node*> scratch_;
};

template <class Set>
void measure(benchmark::State& state, Call call) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Bins<Set> bins(n, 0x5EED0000 + n);
  const std::size_t batch = bins.batch();
  while (state.KeepRunningBatch(static_cast<benchmark::IterationCount>(batch))) {
    state.SetIterationTime(bins.run_batch(call));
  }
  state.counters["runs"] = static_cast<double>(n);
}

// One row per call for each container of containers/list.h.
template <class Entry>
void register_container() {
  using Set = typename Entry::template Type<Node, NodeHook, MallocMetadata>;
  for (Call call : {Call::kPick, Call::kEraseWhenFull, Call::kInsertWhenFreed,
                    Call::kEraseWhenEmpty, Call::kTouched, Call::kFillAndReopen}) {
    const std::string name = std::string(Entry::kName) + "/" + name_of(call);
    benchmark::RegisterBenchmark(name.c_str(), measure<Set>, call)
        ->Arg(4)
        ->Arg(64)
        ->Arg(1024)
        ->Arg(16384)
        ->UseManualTime();
  }
}

template <class... Entries>
void register_containers(runsel::ContainerList<Entries...>) {
  (register_container<Entries>(), ...);
}

}  // namespace

int main(int argc, char** argv) {
  register_containers(runsel::AllContainers{});
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
