// Allocator micro-benchmark: malloc+free pair cost per size, a working set of
// 4-8 KiB blocks and its resident memory, a seeded browser-like mixed loop (single and 2 threads,
// with cross-thread frees) and its resident memory, a loop of huge blocks, and producer/consumer
// threads that free each other's blocks.
//
// Deliberately not linked with runsel: the same binary runs under glibc and under any
// allocator given through LD_PRELOAD. It names the allocator that actually served
// malloc (benchmark context "allocator" and each benchmark's label) so compare.py can
// refuse a run whose allocator it cannot prove.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../allocator_identity.h"

namespace {

// ---------------------------------------------------------------------------
// Which allocator is serving malloc.

using experiments::AllocatorIdentity;
using experiments::detect_allocator;

const AllocatorIdentity& allocator_identity() {
  static const AllocatorIdentity identity = detect_allocator();
  return identity;
}

// Resident set size of the whole process, from /proc/self/statm (no allocation).
double resident_bytes() {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  unsigned long total_pages = 0, resident_pages = 0;
  char* end = nullptr;
  total_pages = strtoul(text, &end, 10);
  resident_pages = strtoul(end, nullptr, 10);
  (void)total_pages;
  return double(resident_pages) * double(sysconf(_SC_PAGESIZE));
}

// ---------------------------------------------------------------------------
// Deterministic random tables, built once before any measurement (fixed seeds, own
// generator, so every allocator and every machine sees the same sequence).

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t uniform(std::uint64_t& state, std::uint64_t low, std::uint64_t high) {
  return low + splitmix64(state) % (high - low + 1);
}

constexpr std::size_t kRingSlots = 64;       // live blocks in BM_pair_ring
constexpr std::size_t kRingSchedule = 4096;  // precomputed slot choices for the ring
constexpr std::size_t kMixedSlots = 4096;    // live blocks per thread in BM_mixed
constexpr std::size_t kHotSlots = 1024;      // the short-lived part of the working set
constexpr std::size_t kMixedOps = 1u << 16;  // precomputed operations, replayed cyclically
constexpr std::size_t kMailboxSlots = 64;    // blocks in flight between threads
constexpr std::size_t kTouchBytes = 32;      // bytes written into each new block

// Browser-like request sizes: mostly DOM-node and string sized, a tail of buffers
// and a few huge (multi-chunk) allocations. Weights are per mille.
struct SizeBand {
  std::uint32_t low, high, weight;
};
constexpr std::array<SizeBand, 7> kSizeBands{{
    {16, 64, 450},          // small nodes, short strings
    {65, 128, 200},         // typical DOM nodes
    {129, 512, 200},        // larger objects, hash-table arrays
    {513, 3840, 100},       // the largest small classes
    {4096, 32768, 40},      // large: page-multiple runs
    {32769, 262144, 9},     // big buffers
    {1048577, 2097152, 1},  // huge: above a chunk
}};

struct MixedOp {
  std::uint32_t size;
  std::uint16_t slot;
  std::uint8_t mailbox;  // mailbox slot for a cross-thread handoff
  bool cross_thread;     // in the 2-thread run, hand this block to the other thread
};

constexpr std::size_t kHugeSizes = 64;         // precomputed huge-block sizes, cyclic
constexpr std::size_t kPageSizedSlots = 2048;  // live blocks in BM_page_sized
constexpr std::size_t kPageSizedOps = 4096;    // precomputed (slot, size) replacements, cyclic
constexpr std::size_t kMessageSizes = 4096;    // precomputed producer/consumer sizes

struct Tables {
  std::array<std::uint8_t, kRingSchedule> ring_slot;
  std::array<std::uint32_t, kHugeSizes> huge_size;           // 5-25 MiB, uniform
  std::array<std::uint16_t, kMessageSizes> message_size;     // 16 B - 16 KiB, log-uniform
  std::array<std::uint16_t, kPageSizedOps> page_sized_size;  // 4,097 - 8,192 B, uniform
  std::array<std::uint16_t, kPageSizedOps> page_sized_slot;
  std::vector<MixedOp> mixed;  // allocated once, before any benchmark runs
};

Tables make_tables() {
  Tables tables;
  std::uint64_t ring_seed = 0x52494e47;  // "RING"
  for (auto& slot : tables.ring_slot) slot = std::uint8_t(splitmix64(ring_seed) % kRingSlots);

  std::uint64_t huge_seed = 0x48554745;  // "HUGE"
  for (auto& size : tables.huge_size) size = std::uint32_t(uniform(huge_seed, 5u << 20, 25u << 20));
  std::uint64_t message_seed = 0x4d534753;  // "MSGS"
  for (auto& size : tables.message_size) {
    // log-uniform: a uniform exponent in [4, 14], then a uniform size in that octave
    const unsigned octave = unsigned(uniform(message_seed, 4, 13));
    size = std::uint16_t(
        uniform(message_seed, std::uint64_t{1} << octave, (std::uint64_t{1} << (octave + 1)) - 1));
  }

  std::uint64_t page_sized_seed = 0x50414745;  // "PAGE"
  for (std::size_t i = 0; i < kPageSizedOps; ++i) {
    tables.page_sized_size[i] = std::uint16_t(uniform(page_sized_seed, 4097, 8192));
    tables.page_sized_slot[i] = std::uint16_t(uniform(page_sized_seed, 0, kPageSizedSlots - 1));
  }

  std::uint64_t seed = 0x4d49584544;  // "MIXED"
  tables.mixed.resize(kMixedOps);
  for (MixedOp& op : tables.mixed) {
    std::uint64_t pick = uniform(seed, 0, 999);
    const SizeBand* band = &kSizeBands.back();
    for (const SizeBand& candidate : kSizeBands) {
      if (pick < candidate.weight) {
        band = &candidate;
        break;
      }
      pick -= candidate.weight;
    }
    op.size = std::uint32_t(uniform(seed, band->low, band->high));
    // Three quarters of replacements hit the hot quarter of the slots: short-lived
    // blocks interleaved with long-lived ones, which is what fragments runs.
    op.slot = uniform(seed, 0, 3) != 0 ? std::uint16_t(uniform(seed, 0, kHotSlots - 1))
                                       : std::uint16_t(uniform(seed, kHotSlots, kMixedSlots - 1));
    op.mailbox = std::uint8_t(uniform(seed, 0, kMailboxSlots - 1));
    op.cross_thread = uniform(seed, 0, 7) == 0;
  }
  return tables;
}

const Tables& tables() {
  static const Tables built = make_tables();
  return built;
}

// ---------------------------------------------------------------------------
// Pair cost.

// malloc immediately followed by free of the same block: the allocator's fastest path.
void BM_pair_immediate(benchmark::State& state) {
  state.SetLabel(allocator_identity().name);
  const std::size_t size = std::size_t(state.range(0));
  for (auto _ : state) {
    void* block = malloc(size);
    benchmark::DoNotOptimize(block);
    static_cast<volatile char*>(block)[0] = 1;
    free(block);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

// A ring of 64 live blocks; each iteration frees one (chosen by a seeded schedule)
// and allocates its replacement, so the freed region is rarely the one handed out next.
void BM_pair_ring(benchmark::State& state) {
  state.SetLabel(allocator_identity().name);
  const std::size_t size = std::size_t(state.range(0));
  const auto& schedule = tables().ring_slot;
  std::array<void*, kRingSlots> ring{};
  for (void*& block : ring) {
    block = malloc(size);
    static_cast<char*>(block)[0] = 1;
  }
  std::size_t step = 0;
  for (auto _ : state) {
    void*& block = ring[schedule[step++ % kRingSchedule]];
    free(block);
    block = malloc(size);
    benchmark::DoNotOptimize(block);
    static_cast<volatile char*>(block)[0] = 1;
  }
  for (void* block : ring) free(block);
  state.SetItemsProcessed(state.iterations());
}

// Huge blocks: malloc a block of 5-25 MiB (a seeded cyclic sequence), write one byte
// in every page, free it. What an allocator does with freed mappings decides the
// cost: a fresh mmap each time pays a page fault for every page.
void BM_huge_loop(benchmark::State& state) {
  state.SetLabel(allocator_identity().name);
  const auto& sizes = tables().huge_size;
  const long page = sysconf(_SC_PAGESIZE);
  std::size_t step = 0;
  for (auto _ : state) {
    const std::size_t size = sizes[step++ % kHugeSizes];
    auto* block = static_cast<volatile char*>(malloc(size));
    if (block == nullptr) {
      state.SkipWithError("malloc of a huge block failed");
      break;
    }
    for (std::size_t offset = 0; offset < size; offset += std::size_t(page)) block[offset] = 1;
    free(const_cast<char*>(block));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(std::int64_t(state.iterations()) * (15 << 20));
}

BENCHMARK(BM_pair_immediate)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Arg(65536);
BENCHMARK(BM_pair_ring)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Arg(65536);

// ---------------------------------------------------------------------------
// Mixed sizes.

// Blocks in flight between threads; whoever takes a block out frees it.
std::array<std::atomic<void*>, kMailboxSlots> mailbox{};
// End-of-run handshake: every thread has settled its working set, then thread 0
// reads the resident size, then everyone frees.
std::atomic<int> threads_settled{0};
std::atomic<bool> resident_measured{false};

constexpr std::uint8_t kMailboxTag = 0x5a;

void* allocate_touched(std::size_t size, std::uint8_t tag) {
  auto* block = static_cast<std::uint8_t*>(malloc(size));
  if (block == nullptr) return nullptr;
  memset(block, tag, size < kTouchBytes ? size : kTouchBytes);
  return block;
}

// Frees a block after checking the tag written at allocation: corruption stops the run.
bool free_checked(void* block, std::uint8_t tag) {
  if (block == nullptr) return true;
  bool intact = *static_cast<volatile std::uint8_t*>(block) == tag;
  free(block);
  return intact;
}

// One thread's share of the mixed loop: a working set and a cursor into the op table.
class MixedWorker {
 public:
  MixedWorker(bool threaded, std::size_t thread)
      : ops_(tables().mixed),
        threaded_(threaded),
        start_((thread * kMixedOps / 2) % kMixedOps),
        slots_(kMixedSlots, nullptr),
        sizes_(kMixedSlots, 0) {
    for (std::size_t slot = 0; slot < kMixedSlots; ++slot) {
      sizes_[slot] = ops_[(start_ + slot) % kMixedOps].size;
      slots_[slot] = allocate_touched(sizes_[slot], std::uint8_t(slot));
    }
  }

  void step() {
    const MixedOp& op = ops_[(start_ + done_++) % kMixedOps];
    if (threaded_ && op.cross_thread) {
      void* block = allocate_touched(op.size, kMailboxTag);
      benchmark::DoNotOptimize(block);
      intact_ &=
          free_checked(mailbox[op.mailbox].exchange(block, std::memory_order_acq_rel), kMailboxTag);
      return;
    }
    intact_ &= free_checked(slots_[op.slot], std::uint8_t(op.slot));
    slots_[op.slot] = allocate_touched(op.size, std::uint8_t(op.slot));
    sizes_[op.slot] = op.size;
    benchmark::DoNotOptimize(slots_[op.slot]);
  }

  // Runs on (untimed) to a whole number of passes over the cyclic op table, at least
  // one. The op sequence repeats exactly, so the live set is then the same whatever
  // the timed iteration count was: resident memory is comparable across allocators.
  void settle() {
    while (done_ == 0 || done_ % kMixedOps != 0) step();
  }

  double live_bytes() const {
    double live = 0;
    for (std::uint32_t size : sizes_) live += size;
    return live;
  }

  bool free_all() {
    for (std::size_t slot = 0; slot < kMixedSlots; ++slot)
      intact_ &= free_checked(slots_[slot], std::uint8_t(slot));
    slots_.assign(kMixedSlots, nullptr);
    return intact_;
  }

 private:
  const std::vector<MixedOp>& ops_;
  const bool threaded_;
  const std::size_t start_;
  std::size_t done_ = 0;
  bool intact_ = true;
  std::vector<void*> slots_;
  std::vector<std::uint32_t> sizes_;
};

// Each iteration replaces one block of a 4096-block working set with a new one of a
// browser-like size and writes its first bytes. With 2 threads each thread has its
// own working set, and one operation in eight instead swaps a new block into a shared
// mailbox and frees what it takes out, usually a block the other thread allocated.
// rss_bytes: the process's resident memory with the working set(s) still live, after
// settling to a fixed point of the op sequence; live_bytes: requested bytes live then
// (mailbox blocks excluded).
void BM_mixed(benchmark::State& state) {
  state.SetLabel(allocator_identity().name);
  const bool threaded = state.threads() > 1;
  const bool first_thread = state.thread_index() == 0;
  MixedWorker worker(threaded, std::size_t(state.thread_index()));
  if (first_thread) {  // the loop's start barrier publishes these to the other threads
    threads_settled.store(0);
    resident_measured.store(false);
  }

  for (auto _ : state) worker.step();

  worker.settle();
  threads_settled.fetch_add(1, std::memory_order_acq_rel);
  state.counters["live_bytes"] = worker.live_bytes();  // summed over threads
  bool intact = true;
  if (first_thread) {
    while (threads_settled.load(std::memory_order_acquire) < state.threads())
      std::this_thread::yield();
    state.counters["rss_bytes"] = resident_bytes();
    resident_measured.store(true, std::memory_order_release);
    for (auto& in_flight : mailbox)
      intact &= free_checked(in_flight.exchange(nullptr, std::memory_order_acq_rel), kMailboxTag);
  } else {
    while (!resident_measured.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  intact &= worker.free_all();
  if (!intact) state.SkipWithError("a block's first byte changed while it was live");
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_mixed);
// Real time, so items/s is the two threads' combined throughput.
BENCHMARK(BM_mixed)->Threads(2)->UseRealTime();

// Blocks of 4,097-8,192 B (a page and a bit: database pages with their headers,
// I/O buffers): a working set of 2048 live blocks; each iteration replaces one
// (seeded slot and size) and writes a byte in each of its pages, so every page
// it spans is resident. rss_bytes and live_bytes as in BM_mixed, after settling
// to a whole number of passes over the cyclic sequence.
void BM_page_sized(benchmark::State& state) {
  state.SetLabel(allocator_identity().name);
  const auto& sizes = tables().page_sized_size;
  const auto& slots = tables().page_sized_slot;
  std::vector<void*> blocks(kPageSizedSlots, nullptr);
  std::vector<std::size_t> live(kPageSizedSlots, 0);
  bool intact = true;
  auto replace = [&](std::size_t slot, std::size_t size) {
    intact &= free_checked(blocks[slot], std::uint8_t(slot));
    auto* block = static_cast<std::uint8_t*>(malloc(size));
    if (block == nullptr) return false;
    for (std::size_t offset = 0; offset < size; offset += 4096) block[offset] = std::uint8_t(slot);
    block[size - 1] = 1;
    blocks[slot] = block;
    live[slot] = size;
    return true;
  };
  for (std::size_t slot = 0; slot < kPageSizedSlots; ++slot) replace(slot, sizes[slot]);
  std::size_t step = 0;
  auto next = [&] {
    const std::size_t op = step++ % kPageSizedOps;
    return replace(slots[op], sizes[op]);
  };
  for (auto _ : state) {
    if (!next()) {
      state.SkipWithError("malloc failed");
      break;
    }
  }
  while (step == 0 || step % kPageSizedOps != 0) next();  // untimed
  double live_bytes = 0;
  for (std::size_t size : live) live_bytes += double(size);
  state.counters["live_bytes"] = live_bytes;
  state.counters["rss_bytes"] = resident_bytes();
  for (std::size_t slot = 0; slot < kPageSizedSlots; ++slot)
    intact &= free_checked(blocks[slot], std::uint8_t(slot));
  if (!intact) state.SkipWithError("a block's first byte changed while it was live");
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_page_sized);

// ---------------------------------------------------------------------------
// Producer/consumer.

// Thread i sends to thread i+1 (mod n), so every block is freed by a thread other
// than the one that allocated it. Each inbox is an intrusive stack (the link lives
// in the block, after its tag byte): senders push with a compare-and-swap, the owner
// takes everything at once, so it is unbounded and never blocks.
constexpr std::size_t kMaxPipelineThreads = 4;
constexpr std::uint8_t kMessageTag = 0xa5;

struct Message {
  std::uint8_t tag;
  Message* next;
};
static_assert(sizeof(Message) <= 16, "fits in the smallest block");

struct alignas(64) Inbox {
  std::atomic<Message*> top{nullptr};

  void push(Message* message) {
    message->next = top.load(std::memory_order_relaxed);
    while (!top.compare_exchange_weak(message->next, message, std::memory_order_release,
                                      std::memory_order_relaxed)) {
    }
  }
  Message* take_all() { return top.exchange(nullptr, std::memory_order_acquire); }
};

std::array<Inbox, kMaxPipelineThreads> inboxes{};

// Each iteration allocates one block of 16 B - 16 KiB (seeded, log-uniform), writes
// its first bytes and sends it to the next thread, then frees one block received
// from the previous thread, if any has arrived. After the loop (whose end is a
// barrier: nobody sends any more) each thread frees what is left in its inbox.
// Real time: items/s is the threads' combined throughput.
void BM_producer_consumer(benchmark::State& state) {
  state.SetLabel(allocator_identity().name);
  const std::size_t threads = std::size_t(state.threads());
  const std::size_t me = std::size_t(state.thread_index());
  Inbox& outbox = inboxes[(me + 1) % threads];
  Inbox& inbox = inboxes[me];
  const auto& sizes = tables().message_size;
  std::size_t step = me * (kMessageSizes / kMaxPipelineThreads);
  Message* received = nullptr;  // taken from the inbox, not yet freed
  bool intact = true;
  auto free_message = [&](Message* message) {
    intact &= message->tag == kMessageTag;
    free(message);
  };
  for (auto _ : state) {
    auto* message =
        static_cast<Message*>(allocate_touched(sizes[step++ % kMessageSizes], kMessageTag));
    outbox.push(message);
    if (received == nullptr) received = inbox.take_all();
    if (received != nullptr) {
      Message* next = received->next;
      free_message(received);
      received = next;
    }
  }
  for (Message* m = received; m != nullptr;) {
    Message* next = m->next;
    free_message(m);
    m = next;
  }
  for (Message* m = inbox.take_all(); m != nullptr;) {
    Message* next = m->next;
    free_message(m);
    m = next;
  }
  if (!intact) state.SkipWithError("a block's first byte changed in flight");
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_producer_consumer)->Threads(2)->UseRealTime();
BENCHMARK(BM_producer_consumer)->Threads(4)->UseRealTime();
BENCHMARK(BM_huge_loop)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  tables();  // build the random tables before anything is measured
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const AllocatorIdentity& identity = allocator_identity();
  benchmark::AddCustomContext("allocator", identity.name);
  benchmark::AddCustomContext("malloc_provider", identity.provider);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
