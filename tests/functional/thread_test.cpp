// Threads: cross-thread frees through mailboxes, every byte verified, one arena per thread.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/seeds.h"

namespace {

using runsel_test::env_number;
using runsel_test::IdentityHolds;
using runsel_test::kMiB;
using runsel_test::opaque;
using runsel_test::snapshot;
using runsel_test::splitmix;

// Every byte of a block is a function of (thread, sequence, offset).
uint64_t block_key(uint32_t thread, uint64_t seq) {
  return (uint64_t{thread} << 40) ^ (seq * 0x9E3779B97F4A7C15ull);
}
uint64_t word_at(uint64_t key, size_t index) { return key + index * 0xD1B54A32D192ED03ull; }

void fill(unsigned char* p, size_t n, uint64_t key) {
  size_t words = n / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = word_at(key, i);
    memcpy(p + i * 8, &w, 8);
  }
  uint64_t tail = word_at(key, words);
  memcpy(p + words * 8, &tail, n % 8);
}
bool verify(const unsigned char* p, size_t n, uint64_t key) {
  size_t words = n / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w;
    memcpy(&w, p + i * 8, 8);
    if (w != word_at(key, i)) return false;
  }
  uint64_t tail = word_at(key, words);
  return memcmp(p + words * 8, &tail, n % 8) == 0;
}

// Mostly small, some large, every 400th huge.
size_t random_size(uint64_t& rng, uint64_t seq) {
  if (seq % 400 == 399) return 1032193 + splitmix(rng) % (2 * kMiB);
  uint64_t r = splitmix(rng);
  unsigned kind = r % 100;
  r >>= 8;
  if (kind < 80) return 1 + r % 3840;
  if (kind < 97) return 3841 + r % (60 * 1024);
  return 64 * 1024 + r % (400 * 1024);
}

struct Block {
  unsigned char* p;
  size_t size;
  uint32_t origin;
  uint64_t seq;
};

struct Mailbox {
  std::mutex lock;
  std::vector<Block> items;
};

// Each thread sends each block it makes to a random thread's mailbox (itself
// included) and frees what arrives in its own, after checking every byte.
class Exchange {
 public:
  Exchange(unsigned threads, size_t per_thread) : mailboxes_(threads), per_thread_(per_thread) {}

  void run_thread(uint32_t self) {
    std::vector<Block> taken;
    produce(self, taken);
    producers_done_.fetch_add(1);
    while (producers_done_.load() < mailboxes_.size() || in_flight_.load() > 0) {
      if (!drain(self, taken)) sched_yield();
    }
  }

  size_t cross_thread_frees() const { return cross_.load(); }
  size_t frees() const { return frees_.load(); }
  std::string first_error() {
    std::lock_guard<std::mutex> guard(error_lock_);
    return error_;
  }

 private:
  void produce(uint32_t self, std::vector<Block>& taken) {
    uint64_t rng = 0xC0FFEE + self;
    for (uint64_t seq = 0; seq < per_thread_; ++seq) {
      while (in_flight_.load(std::memory_order_relaxed) > 256 * mailboxes_.size()) {
        drain(self, taken);
        sched_yield();
      }
      size_t size = random_size(rng, seq);
      auto* p = static_cast<unsigned char*>(opaque(malloc(size)));
      if (!p) return fail("malloc returned NULL");
      if (splitmix(rng) % 10 == 0) {  // now and then, grow or shrink first
        fill(p, size, block_key(self, seq) ^ 1);
        size_t resized = random_size(rng, seq);
        auto* q = static_cast<unsigned char*>(opaque(realloc(p, resized)));
        if (!q) return fail("realloc returned NULL");
        if (!verify(q, size < resized ? size : resized, block_key(self, seq) ^ 1))
          return fail("realloc lost contents");
        p = q;
        size = resized;
      }
      fill(p, size, block_key(self, seq));
      uint32_t to = static_cast<uint32_t>(splitmix(rng) % mailboxes_.size());
      in_flight_.fetch_add(1, std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> guard(mailboxes_[to].lock);
        mailboxes_[to].items.push_back(Block{p, size, self, seq});
      }
      if (seq % 8 == 0) drain(self, taken);
    }
  }

  bool drain(uint32_t self, std::vector<Block>& taken) {
    {
      std::lock_guard<std::mutex> guard(mailboxes_[self].lock);
      taken.swap(mailboxes_[self].items);
    }
    for (const Block& b : taken) {
      if (!verify(b.p, b.size, block_key(b.origin, b.seq)))
        fail("block " + std::to_string(b.seq) + " of thread " + std::to_string(b.origin) + " (" +
             std::to_string(b.size) + " bytes) was overwritten");
      free(b.p);
      frees_.fetch_add(1, std::memory_order_relaxed);
      if (b.origin != self) cross_.fetch_add(1, std::memory_order_relaxed);
      in_flight_.fetch_sub(1, std::memory_order_relaxed);
    }
    bool any = !taken.empty();
    taken.clear();
    return any;
  }
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> guard(error_lock_);
    if (error_.empty()) error_ = why;
  }

  std::vector<Mailbox> mailboxes_;
  size_t per_thread_;
  std::atomic<size_t> in_flight_{0}, producers_done_{0}, cross_{0}, frees_{0};
  std::mutex error_lock_;
  std::string error_;
};

class Threads : public testing::TestWithParam<unsigned> {};

TEST_P(Threads, CrossThreadFreesKeepEveryByte) {
  const unsigned count = GetParam();
  const size_t per_thread = 6000 * env_number("RUNSEL_STRESS", 1);
  const runsel_stats_t before = snapshot();
  {
    Exchange exchange(count, per_thread);
    // Someone reads the stats while the threads work: it must not disturb them.
    std::atomic<bool> stop{false};
    std::thread observer([&] {
      while (!stop.load()) {
        runsel_stats_t s;
        runsel_stats(&s);
        sched_yield();
      }
    });
    std::vector<std::thread> workers;
    for (uint32_t t = 0; t < count; ++t)
      workers.emplace_back([&exchange, t] { exchange.run_thread(t); });
    for (std::thread& w : workers) w.join();
    stop = true;
    observer.join();
    EXPECT_EQ(exchange.first_error(), "");
    EXPECT_EQ(exchange.frees(), count * per_thread);
    EXPECT_GT(exchange.cross_thread_frees(), exchange.frees() / 2) << "most frees are cross-thread";
  }
  runsel_stats_t after = snapshot();
  EXPECT_TRUE(IdentityHolds(after));
  EXPECT_EQ(runsel_check(), 0);
  EXPECT_EQ(after.huge_count, before.huge_count);
#if RUNSEL_THREAD_CACHE_BUILD
  // nfree counts the regions the caches gave back, not the program's frees
  // (a region freed into a cache and handed out again never reaches its
  // run): what stays exact is that the program's bytes are all given back.
  EXPECT_EQ(runsel_test::live_bytes(after), runsel_test::live_bytes(before));
  EXPECT_GT(after.nfree, before.nfree);
#else
  EXPECT_GE(after.nfree - before.nfree, count * per_thread);
#endif
}

INSTANTIATE_TEST_SUITE_P(Runsel, Threads, testing::Values(4u, 8u));

// Four threads that hold a block each at the same time: the blocks come
// from more than one arena, hence more than one chunk.
TEST(Arenas, ThreadsGetTheirOwnArenas) {
  constexpr unsigned kThreads = 4;
  std::barrier sync(kThreads);
  std::vector<uintptr_t> chunks(kThreads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      void* p = opaque(malloc(64));
      chunks[t] = reinterpret_cast<uintptr_t>(p) & ~(kMiB - 1);
      sync.arrive_and_wait();
      free(p);
    });
  }
  for (std::thread& w : workers) w.join();
  runsel_stats_t s = snapshot();
  EXPECT_GT(s.narenas, 1u);
  EXPECT_GT(std::set<uintptr_t>(chunks.begin(), chunks.end()).size(), 1u)
      << "all four threads used one chunk";
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_EQ(runsel_check(), 0);
}

// A block freed by a thread that has exited, and by a thread that never
// allocated, returns to its owner's arena.
TEST(Arenas, FreesFromOtherAndFinishedThreads) {
  std::vector<void*> blocks;
  std::thread maker([&] {
    for (size_t size : {size_t{32}, size_t{1000}, size_t{50000}, 2 * kMiB})
      blocks.push_back(opaque(malloc(size)));
  });
  maker.join();
  const runsel_stats_t before = snapshot();
  std::thread freer([&] {
    for (void* p : blocks) free(p);
  });
  freer.join();
  runsel_stats_t after = snapshot();
  EXPECT_EQ(before.allocated - after.allocated, size_t{32 + 1024 + 53248 + 2 * kMiB});
  EXPECT_TRUE(IdentityHolds(after));
  EXPECT_EQ(runsel_check(), 0);
}

// Threads that run one after another share an arena: one that exits detaches
// from its arena, and the next thread takes the least loaded one, so a
// program that starts fresh threads reuses arenas (and their dirty pages)
// instead of spreading over all of them.
TEST(Arenas, AnExitedThreadsArenaIsReused) {
  constexpr unsigned kThreads = 6;
  std::vector<void*> blocks(kThreads);
  for (unsigned t = 0; t < kThreads; ++t) {
    std::thread([&, t] { blocks[t] = opaque(malloc(64)); }).join();
  }
  std::set<uintptr_t> chunks;
  for (void* p : blocks) chunks.insert(reinterpret_cast<uintptr_t>(p) & ~(kMiB - 1));
  EXPECT_EQ(chunks.size(), 1u) << "threads that ran one after another used different arenas";
  for (void* p : blocks) free(p);
  EXPECT_EQ(runsel_check(), 0);
}

// Eight threads at once (so as many arenas: meson runs this test with
// RUNSEL_ARENAS=8, the default being one per CPU) each free 14 MiB of their
// own large blocks, keeping one in 16 so that no chunk empties: the dirty pages of all arenas
// together stay within the deferred policy's hard bound on them, twice the process-wide budget
// (purge.h: 48 MiB), where each arena alone (below 16 MiB, its own hard bound) kept them.
TEST(Arenas, DirtyPagesAreBoundedAcrossArenas) {
  constexpr unsigned kThreads = 8;
  constexpr size_t kBlock = 64 * 1024, kBlocks = 240;
  constexpr size_t kProcessBound = 2 * 48 * 256 * 4096;
  std::barrier sync(kThreads + 1);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < kThreads; ++t) {
    workers.emplace_back([&] {
      std::vector<void*> mine;
      for (size_t i = 0; i < kBlocks; ++i) {
        mine.push_back(opaque(malloc(kBlock)));
        memset(mine.back(), 1, kBlock);
      }
      sync.arrive_and_wait();
      for (size_t i = 0; i < kBlocks; ++i) {
        if (i % 16 != 0) free(mine[i]);
      }
      sync.arrive_and_wait();  // every thread has freed: the main thread looks
      sync.arrive_and_wait();
      for (size_t i = 0; i < kBlocks; i += 16) free(mine[i]);
    });
  }
  sync.arrive_and_wait();
  sync.arrive_and_wait();
  const runsel_stats_t s = snapshot();
  sync.arrive_and_wait();
  for (std::thread& w : workers) w.join();
  // With fewer arenas each one's own bound would keep the total below it too.
  if (s.narenas < kThreads) GTEST_SKIP() << "needs " << kThreads << " arenas (RUNSEL_ARENAS)";
  EXPECT_LE(s.dirty, kProcessBound) << s.narenas << " arenas";
  EXPECT_TRUE(IdentityHolds(s));
  EXPECT_EQ(runsel_check(), 0);
}

// The same bound when the dirty pages came first: the main thread's arena
// holds 15 MiB of dirty pages (under its own hard bound of 16 MiB, so kept)
// before any other arena exists, then seven threads dirty theirs. The
// process-wide total must count the main thread's pages although its arena
// changes nothing after the other arenas appear (it waits). Run in a fresh
// process (the "threadsafe" death-test style re-runs the binary), where the
// second arena is created inside the test.
TEST(Arenas, DirtyPagesBeforeTheSecondArenaCountAcrossArenas) {
  if (env_number("RUNSEL_ARENAS", 4 * std::thread::hardware_concurrency()) < 8) {
    GTEST_SKIP() << "needs 8 arenas (RUNSEL_ARENAS)";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto scenario = [] {
    // Seven threads, each in an arena of its own, dirty 13.5 MiB each: 94 MiB,
    // under the bound by themselves, 109 MiB with the main thread's 15.
    constexpr unsigned kThreads = 7;
    constexpr size_t kBlock = 64 * 1024, kEarlyBlocks = 240, kBlocks = 230;
    constexpr size_t kProcessBound = 2 * 48 * 256 * 4096;
    std::vector<void*> early;
    for (size_t i = 0; i < kEarlyBlocks; ++i) {
      early.push_back(opaque(malloc(kBlock)));
      memset(early.back(), 1, kBlock);
    }
    for (size_t i = 0; i < kEarlyBlocks; ++i) {
      if (i % 16 != 0) free(early[i]);
    }
    const runsel_stats_t before = snapshot();
    std::barrier sync(kThreads + 1);
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < kThreads; ++t) {
      workers.emplace_back([&] {
        std::vector<void*> mine;
        for (size_t i = 0; i < kBlocks; ++i) {
          mine.push_back(opaque(malloc(kBlock)));
          memset(mine.back(), 1, kBlock);
        }
        sync.arrive_and_wait();
        for (size_t i = 0; i < kBlocks; ++i) {
          if (i % 16 != 0) free(mine[i]);
        }
        sync.arrive_and_wait();
        sync.arrive_and_wait();
        for (size_t i = 0; i < kBlocks; i += 16) free(mine[i]);
      });
    }
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    const runsel_stats_t s = snapshot();
    sync.arrive_and_wait();
    for (std::thread& w : workers) w.join();
    fprintf(stderr, "main thread's dirty before: %zu, all %zu arenas' after: %zu (bound %zu)\n",
            before.dirty, s.narenas, s.dirty, kProcessBound);
    // Kept at first, else the test proves nothing.
    const bool kept = before.narenas == 1 && before.dirty > 14 * 1024 * 1024;
    const bool spread = s.narenas >= kThreads + 1;
    _exit(kept && spread && s.dirty <= kProcessBound && runsel_check() == 0 ? 0 : 1);
  };
  EXPECT_EXIT(scenario(), testing::ExitedWithCode(0), "");
}

// The growth purge (purge.h, growth_dirty_share): with a second arena, so
// under the process-wide budget, the main thread's arena frees 24 MiB of
// 256-byte blocks (dirty pages tagged with their class, under the 48 MiB
// budget, so kept), then allocates 24 MiB of 1 KiB blocks, whose runs cannot
// use those pages. Every 256 KiB of fresh pages it commits purges as many of
// the dirty ones, down to 1/8 of its committed pages (the default share): the dirty pages
// end near 3.3 MiB of 30 MiB committed, where without the growth purge
// (growth_dirty_share:0) all 24 MiB stay. Run in a fresh process, as the
// test above, so that nothing else is dirty.
TEST(Arenas, AnArenaThatGrowsGivesBackAnotherClasssDirtyPages) {
  if (env_number("RUNSEL_ARENAS", 4 * std::thread::hardware_concurrency()) < 2) {
    GTEST_SKIP() << "needs 2 arenas (RUNSEL_ARENAS)";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto scenario = [] {
    constexpr size_t kTotal = 24 * kMiB, kFirstSize = 256, kSecondSize = 1024;
    // A second arena: a thread that allocates while the main thread is attached.
    std::thread([] { free(opaque(malloc(64))); }).join();
    std::vector<void*> first, second;
    first.reserve(kTotal / kFirstSize);
    second.reserve(kTotal / kSecondSize);
    for (size_t i = 0; i < kTotal / kFirstSize; ++i) {
      first.push_back(opaque(malloc(kFirstSize)));
      memset(first.back(), 1, kFirstSize);
    }
    for (void* p : first) free(p);
    const runsel_stats_t before = snapshot();
    for (size_t i = 0; i < kTotal / kSecondSize; ++i) {
      second.push_back(opaque(malloc(kSecondSize)));
      memset(second.back(), 2, kSecondSize);
    }
    const runsel_stats_t after = snapshot();
    for (void* p : second) free(p);
    fprintf(stderr, "%zu arenas; dirty before the growth %zu, after %zu (committed %zu)\n",
            after.narenas, before.dirty, after.dirty, after.committed);
    // Kept at first, else the test proves nothing.
    const bool kept = before.narenas >= 2 && before.dirty > 20 * kMiB;
    // About committed/8: each purge leaves 1/8 of the committed pages before
    // it; the other arena and metadata add a little.
    const bool given_back = after.dirty <= after.committed / 8 + kMiB;
    _exit(kept && given_back && IdentityHolds(after) && runsel_check() == 0 ? 0 : 1);
  };
  EXPECT_EXIT(scenario(), testing::ExitedWithCode(0), "");
}

}  // namespace
