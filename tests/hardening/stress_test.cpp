// Concurrency stress: 2, 4 and 8 threads allocate, hand blocks to each other
// (producer/consumer cross-thread frees) and grow them by realloc chains,
// every byte verified; afterwards no arena memory is left behind.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/seeds.h"

// Under ThreadSanitizer, whose runtime owns the process's malloc, the test
// reaches runsel through renamed entry points (see tests/hardening/meson.build).
#ifdef RUNSEL_RENAMED_API
extern "C" {
void* runsel_renamed_malloc(size_t size);
void* runsel_renamed_realloc(void* p, size_t size);
void runsel_renamed_free(void* p);
}
#endif

namespace {

using namespace runsel_test;

// The allocator under test.
namespace api {
#ifdef RUNSEL_RENAMED_API
inline void* malloc(size_t size) { return runsel_renamed_malloc(size); }
inline void* realloc(void* p, size_t size) { return runsel_renamed_realloc(p, size); }
inline void free(void* p) { runsel_renamed_free(p); }
#else
inline void* malloc(size_t size) { return ::malloc(size); }
inline void* realloc(void* p, size_t size) { return ::realloc(p, size); }
inline void free(void* p) { ::free(p); }
#endif
}  // namespace api

constexpr size_t kChunkHeader = 3 * 4096;     // header pages of an arena chunk
constexpr size_t kRegistryLeaf = 128 * 1024;  // one leaf of the chunk registry
constexpr size_t kSlack = 16 * 4096;

struct Parcel {
  void* p;
  size_t size;  // bytes carrying the pattern
  uint64_t key;
};

// Blocks sent to one thread; the owner takes them all at once.
struct Mailbox {
  std::mutex lock;
  std::vector<Parcel> parcels;
};

struct Shared {
  std::vector<Mailbox> mailboxes;
  std::atomic<size_t> operations{0};
  std::atomic<size_t> cross_thread_frees{0};
  std::atomic<size_t> realloc_steps{0};
  std::mutex error_lock;
  std::string first_error;
  explicit Shared(size_t threads) : mailboxes(threads) {}
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> guard(error_lock);
    if (first_error.empty()) first_error = what;
  }
  bool failed() {
    std::lock_guard<std::mutex> guard(error_lock);
    return !first_error.empty();
  }
};

class Worker {
 public:
  Worker(Shared& shared, size_t index, size_t threads, uint64_t seed)
      : shared_(shared), index_(index), threads_(threads), random_(seed + index * 0x1234567ull) {}

  void run(size_t steps, std::barrier<>& done_sending) {
    mine_.reserve(kKeep);
    for (size_t i = 0; i < steps && !shared_.failed(); ++i) {
      uint64_t r = random_.below(100);
      if (r < 35 || mine_.empty()) {
        allocate();
      } else if (r < 50) {
        send();
      } else if (r < 62) {
        receive();
      } else if (r < 85) {
        realloc_chain();
      } else {
        release(take(random_.below(mine_.size())));
      }
    }
    done_sending.arrive_and_wait();  // nobody sends after this
    receive();
    while (!mine_.empty()) release(take(mine_.size() - 1));
    shared_.operations += operations_;
  }

 private:
  static constexpr size_t kKeep = 256;

  // Mostly small blocks, some large, a few huge.
  size_t draw_size() {
    uint64_t r = random_.below(10000);
    if (r < 7000) return 1 + random_.below(512);
    if (r < 9000) return 513 + random_.below(3840 - 512);
    if (r < 9900) return 4096 + random_.below(60 * 1024);
    if (r < 9995) return 64 * 1024 + random_.below(192 * 1024);
    return kChunk + random_.below(kChunk);
  }

  bool verify(const Parcel& parcel, const char* when) {
    size_t bad = first_mismatch(parcel.p, parcel.size, parcel.key);
    if (bad == kNoMismatch) return true;
    char text[200];
    snprintf(text, sizeof text, "thread %zu: block %p of %zu corrupted at byte %zu (%s)", index_,
             parcel.p, parcel.size, bad, when);
    shared_.fail(text);
    return false;
  }

  Parcel take(size_t at) {
    Parcel parcel = mine_[at];
    mine_[at] = mine_.back();
    mine_.pop_back();
    return parcel;
  }

  void release(const Parcel& parcel) {
    verify(parcel, "before free");
    api::free(parcel.p);
    ++operations_;
  }

  void allocate() {
    if (mine_.size() == kKeep) release(take(random_.below(kKeep)));
    size_t size = draw_size();
    void* p = api::malloc(size);
    ++operations_;
    if (p == nullptr) return shared_.fail("malloc(" + std::to_string(size) + ") failed");
    Parcel parcel{p, size, random_.next()};
    fill_pattern(p, 0, size, parcel.key);
    mine_.push_back(parcel);
  }

  // Producer: a block goes to another thread, which frees it.
  void send() {
    Parcel parcel = take(random_.below(mine_.size()));
    size_t to = (index_ + 1 + random_.below(threads_ - 1)) % threads_;
    Mailbox& box = shared_.mailboxes[to];
    std::lock_guard<std::mutex> guard(box.lock);
    box.parcels.push_back(parcel);
  }

  // Consumer: verify and free everything others sent.
  void receive() {
    std::vector<Parcel> parcels;
    {
      Mailbox& box = shared_.mailboxes[index_];
      std::lock_guard<std::mutex> guard(box.lock);
      parcels.swap(box.parcels);
    }
    for (const Parcel& parcel : parcels) release(parcel);
    shared_.cross_thread_frees += parcels.size();
  }

  // One block grown and shrunk several times; the kept prefix must survive
  // each step, whichever thread allocated it.
  void realloc_chain() {
    Parcel parcel = take(random_.below(mine_.size()));
    size_t links = 1 + random_.below(6);
    for (size_t link = 0; link < links; ++link) {
      size_t size = random_.one_in(4) ? 1 + parcel.size / 2 : parcel.size + draw_size();
      if (size > 4 * kChunk) size = draw_size();
      void* q = api::realloc(parcel.p, size);
      ++operations_;
      ++shared_.realloc_steps;
      if (q == nullptr) {
        shared_.fail("realloc(" + std::to_string(size) + ") failed");
        mine_.push_back(parcel);
        return;
      }
      Parcel moved{q, size < parcel.size ? size : parcel.size, parcel.key};
      if (!verify(moved, "after realloc")) return;
      parcel = Parcel{q, size, random_.next()};
      fill_pattern(q, 0, size, parcel.key);
    }
    mine_.push_back(parcel);
  }

  Shared& shared_;
  size_t index_, threads_;
  Random random_;
  std::vector<Parcel> mine_;
  size_t operations_ = 0;
};

// The figures after the calling thread gives its cache back (with a thread
// cache; runsel_test::snapshot): what stays cached then is in other threads'
// caches.
using runsel_test::snapshot;

// Under TSan (about ten times slower) CI runs a quarter of the steps.
#ifdef RUNSEL_RENAMED_API
constexpr size_t kStepsPerCount = 50000;
#else
constexpr size_t kStepsPerCount = 200000;
#endif

// What the threads did.
struct Outcome {
  size_t operations = 0, cross_thread_frees = 0, realloc_steps = 0;
  std::string first_error;
  double seconds = 0;
};

// Starts and joins `threads` threads that allocate once: that creates their
// arenas, and glibc caches the thread stacks with their malloc'd TLS vectors,
// which outlive the threads.
void warm_up(size_t threads) {
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([] { api::free(opaque(api::malloc(64))); });
  for (std::thread& thread : pool) thread.join();
}

// Runs `threads` workers for `total_steps` in all.
Outcome run_workers(size_t threads, size_t total_steps, uint64_t seed) {
  Outcome outcome;
  auto start = std::chrono::steady_clock::now();
  {
    Shared shared(threads);
    std::barrier<> done_sending(static_cast<std::ptrdiff_t>(threads));
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back(
          [&, t] { Worker(shared, t, threads, seed).run(total_steps / threads, done_sending); });
    for (std::thread& thread : pool) thread.join();
    outcome.operations = shared.operations;
    outcome.cross_thread_frees = shared.cross_thread_frees;
    outcome.realloc_steps = shared.realloc_steps;
    outcome.first_error = shared.first_error;
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

// Everything the threads allocated was freed: the live bytes are back to
// where they were, to the byte; what stays mapped and committed is bounded.
// (With a thread cache, allocated also counts the regions the thread caches
// hold, thread_cached: the program's bytes are live_bytes.)
void expect_memory_back(const runsel_stats_t& before, const runsel_stats_t& after) {
  EXPECT_EQ(runsel_test::live_bytes(after), runsel_test::live_bytes(before));
  // The workers have exited, and their exits gave their caches back. In the
  // fast profile, each arena also keeps freed large runs of 1 to 4 pages (32
  // of each length, 1.25 MiB at most: memory/README.md, "Profiles"), which
  // thread_cached counts.
#if RUNSEL_FAST_PROFILE_BUILD
  EXPECT_LE(after.thread_cached, after.narenas * (32 * (1 + 2 + 3 + 4) * size_t{4096}));
#else
  EXPECT_EQ(after.thread_cached, 0u);
#endif
  EXPECT_EQ(after.huge_count, before.huge_count);
  // What stays mapped is bounded: each arena may keep up to 8 spare chunks
  // (which hold its dirty pages, bounded by the purge policy), and each bin's
  // kept empty run may hold one more chunk until it is released.
  EXPECT_LE(after.dirty, runsel_test::dirty_bound(after));
  // Freed huge mappings are kept too, in a cache bounded in bytes.
  EXPECT_LE(after.huge_cached, runsel_test::kHugeCacheBound);
  size_t kept_empty_runs = 0;
  for (const runsel_bin_stats& bin : after.bins) kept_empty_runs += bin.empty_runs;
  // Chunks with nothing allocated whose free pages keep their size class
  // stay mapped too (memory/arena/chunk.h); beyond the spares their pages are
  // purged, so they cost address space, not memory.
  const size_t allowance =
      (after.narenas * 8 + kept_empty_runs + after.idle_chunks) * kChunk + after.huge_cached;
  EXPECT_LE(after.mapped, before.mapped + allowance)
      << "mapped " << before.mapped << " -> " << after.mapped << " with " << after.narenas
      << " arenas";
  // Once dirty pages are purged, committed memory outside bookkeeping is
  // back to its level (a little slack: the main thread's partly used runs),
  // and bookkeeping grew by no more than the headers of the spare chunks and
  // new chunk-registry leaves (128 KiB each, for chunks mapped in a 16 GiB
  // range not used before; kept for good, like mozjemalloc's radix tree).
  // Purging gives the kept empty runs back first (after this thread's cache:
  // the runs it empties are purged too, and the snapshot flushes nothing).
  runsel_thread_cache_flush();
  runsel_free_dirty_pages();
  const runsel_stats_t purged = snapshot();
  EXPECT_EQ(purged.dirty, 0u);
  // A chunk whose pages held small runs stays mapped, purged, for good: its
  // pages keep their size class so that a stale pointer never meets another
  // class's block (memory/arena/chunk.h). Purging unmaps the other chunks
  // but one spare per arena; what the kept ones cost is their headers,
  // bounded below.
  EXPECT_LE(purged.chunks, after.chunks) << "purging maps no chunk";
  const size_t new_chunks = purged.chunks > before.chunks ? purged.chunks - before.chunks : 0;
  EXPECT_LE(purged.committed - purged.bookkeeping, before.committed - before.bookkeeping + kSlack)
      << "committed " << before.committed << " -> " << purged.committed << " (waste "
      << before.waste << " -> " << purged.waste << ", bin_unused " << before.bin_unused << " -> "
      << purged.bin_unused << ")";
  EXPECT_LE(purged.bookkeeping, before.bookkeeping + new_chunks * kChunkHeader + 2 * kRegistryLeaf)
      << "bookkeeping " << before.bookkeeping << " -> " << purged.bookkeeping << ", chunks "
      << before.chunks << " -> " << purged.chunks;
}

class Stress : public testing::TestWithParam<size_t> {};

// CI: 200,000 steps per thread count (about 300,000 allocation calls);
// RUNSEL_STRESS=50 runs 10 million steps (about 15 million calls) per count.
TEST_P(Stress, CrossThreadFreesAndReallocChains) {
  const size_t threads = GetParam();
  const size_t total_steps = kStepsPerCount * stress_factor();
  const uint64_t seed = test_seed();
  SCOPED_TRACE(replay_hint(seed));
  warm_up(threads);
  runsel_free_dirty_pages();
  const runsel_stats_t before = snapshot();
  const Outcome outcome = run_workers(threads, total_steps, seed);
  ASSERT_EQ(outcome.first_error, "");
  const runsel_stats_t after = snapshot();
  printf(
      "stress: %zu threads, %zu allocation calls (%zu cross-thread frees, %zu realloc steps) in "
      "%.2f s, %s\n",
      threads, outcome.operations, outcome.cross_thread_frees, outcome.realloc_steps,
      outcome.seconds, replay_hint(seed).c_str());
  printf(
      "stress: mapped %zu -> %zu, committed %zu -> %zu, dirty %zu (budget %zu per arena, %zu "
      "arenas), allocated %zu -> %zu (thread caches %zu -> %zu)\n",
      before.mapped, after.mapped, before.committed, after.committed, after.dirty, after.dirty_max,
      after.narenas, before.allocated, after.allocated, before.thread_cached, after.thread_cached);
  testing::Test::RecordProperty("operations", std::to_string(outcome.operations));
  EXPECT_GE(outcome.operations, total_steps);
  EXPECT_GT(outcome.cross_thread_frees, 0u);
  EXPECT_EQ(runsel_check(), 0);
  expect_memory_back(before, after);
}

INSTANTIATE_TEST_SUITE_P(Threads, Stress, testing::Values(2u, 4u, 8u),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return std::to_string(info.param) + "_threads";
                         });

#ifndef RUNSEL_RENAMED_API
TEST(Stress, RunsOnTheExpectedVariant) { EXPECT_TRUE(RunsExpectedVariant()); }
#endif

}  // namespace
