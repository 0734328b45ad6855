// Remote frees (a small region freed by a thread of another arena, and in the
// fast profile a large one too) are queued
// for the owning arena without its lock (Arena::free_remote) and taken in by
// whoever next holds that lock. A bad pointer is refused when it is freed,
// as without the queue; a double free is caught when the arena takes in its
// queue: at the latest at the owner's next malloc or free, runsel_stats or
// runsel_check, malloc_trim, or the freeing thread's 64th remote free (which
// tries the arena's lock). Each test names exactly which of these catches it.
// With a thread cache (RUNSEL_THREAD_CACHE_BUILD) a free goes to the freeing
// thread's cache first; the tests flush it (runsel_thread_cache_flush, a
// no-op without the cache) where a free must reach the queue or the bitmap.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/child.h"
#include "support/heap.h"

// The double frees are deliberate; GCC sees some of them.
#pragma GCC diagnostic ignored "-Wuse-after-free"

namespace {

using runsel_test::died_of_abort;
using runsel_test::opaque;
using runsel_test::run_in_child;

const char kTakenIn[] = " (found when its arena took in frees from other threads)";

// An owner thread allocates a 64-byte block (and a block it keeps, so that
// the block's run is not given back with its chunk when it empties) and
// stays alive (so the remote thread gets another arena); then the remote thread runs
// `remote(block)`; then the owner runs `owner_after(block)`. The block's address goes to stderr
// first ("block 0x...") so the parent can name it.
template <class Remote, class OwnerAfter>
void owner_and_remote(Remote remote, OwnerAfter owner_after, size_t size = 64) {
  std::atomic<void*> block{nullptr};
  std::atomic<int> stage{0};
  std::thread owner([&] {
    opaque(malloc(1000));
    void* p = opaque(malloc(size));
    fprintf(stderr, "block %p\n", p);
    fflush(stderr);
    block.store(p);
    stage.store(1);
    while (stage.load() != 2) sched_yield();
    owner_after(p);
  });
  std::thread other([&] {
    while (stage.load() != 1) sched_yield();
    opaque(malloc(16));  // this thread's own arena, another than the owner's
    remote(block.load());
    stage.store(2);
  });
  owner.join();
  other.join();
}

// The pointer the child printed, as %p prints it.
std::string block_of(const std::string& err) {
  const size_t at = err.find("block ");
  if (at == std::string::npos) return "?";
  return err.substr(at + 6, err.find('\n', at) - at - 6);
}

std::string line_for(const std::string& err, const std::string& problem) {
  return "runsel: free(" + block_of(err) + "): " + problem;
}

// Both frees are queued before the owner looks: the owner's next malloc
// takes the queue in, visits the block twice, and aborts at the second.
TEST(RemoteFree, TwoQueuedFreesOfOneBlockAbortWhenTheOwnerNextAllocates) {
  const auto outcome = run_in_child([] {
    owner_and_remote(
        [](void* p) {
          free(p);
          runsel_thread_cache_flush();
          free(p);
          runsel_thread_cache_flush();
        },
        [](void*) { opaque(malloc(64)); });
  });
  EXPECT_TRUE(died_of_abort(outcome.status)) << outcome.err;
  EXPECT_NE(outcome.err.find(line_for(outcome.err, "double free of a small region") + kTakenIn),
            std::string::npos)
      << outcome.err;
}

// Queued, then freed by the owner: the owner's free takes the queue in
// first, so its own free finds the region free, and aborts at once. With a
// thread cache too: the cache finds the queue's key in the region's first
// word and takes the queue in before it would cache the region (it once
// cached it, and handed it out again before the queue was taken in).
TEST(RemoteFree, QueuedThenFreedByTheOwnerAbortsAtTheOwnersFree) {
  const auto outcome = run_in_child([] {
    owner_and_remote(
        [](void* p) {
          free(p);
          runsel_thread_cache_flush();
        },
        [](void* p) { free(p); });
  });
  EXPECT_TRUE(died_of_abort(outcome.status)) << outcome.err;
  EXPECT_NE(outcome.err.find(line_for(outcome.err, "double free of a small region\n")),
            std::string::npos)
      << outcome.err;
}

// Freed by the owner, then by another thread: the second free is queued (the
// region's run is still there), and runsel_check, called by a third thread,
// takes every arena's queue in and aborts.
TEST(RemoteFree, FreedThenQueuedAbortsWhenTheQueueIsTakenIn) {
  const auto outcome = run_in_child([] {
    owner_and_remote([](void*) {},
                     [](void* p) {  // the owner frees it, then a thread of a third arena
                       free(p);
                       runsel_thread_cache_flush();  // p free in its run
                       std::thread([p] { free(p); }).join();
                       runsel_check();
                     });
  });
  EXPECT_TRUE(died_of_abort(outcome.status)) << outcome.err;
  EXPECT_NE(outcome.err.find(line_for(outcome.err, "double free of a small region") + kTakenIn),
            std::string::npos)
      << outcome.err;
}

// A pointer that is not the start of a region is refused by the freeing
// thread, at its free, as without the queue.
TEST(RemoteFree, AnInteriorPointerIsRefusedAtOnce) {
  const auto outcome = run_in_child(
      [] { owner_and_remote([](void* p) { free(static_cast<char*>(p) + 16); }, [](void*) {}); });
  EXPECT_TRUE(died_of_abort(outcome.status)) << outcome.err;
  char expected[64];
  snprintf(expected, sizeof expected, "runsel: free(%p): not the start of",
           static_cast<void*>(
               reinterpret_cast<char*>(strtoull(block_of(outcome.err).c_str(), nullptr, 16)) + 16));
  EXPECT_NE(outcome.err.find(expected), std::string::npos) << outcome.err;
}

// The owner allocates blocks[i] = malloc(size_of(i)) for every i, then another
// thread (of another arena) frees them all, then the owner runs `owner_after`.
template <class SizeOf, class OwnerAfter>
void freed_by_another_thread(std::vector<void*>& blocks, SizeOf size_of, OwnerAfter owner_after) {
  std::atomic<int> stage{0};
  std::thread owner([&] {
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i] = opaque(malloc(size_of(i)));
      memset(blocks[i], 0x5a, 16);
    }
    stage.store(1);
    while (stage.load() != 2) sched_yield();
    owner_after();
  });
  std::thread freer([&] {
    while (stage.load() != 1) sched_yield();
    opaque(malloc(16));
    for (void* p : blocks) free(p);
    stage.store(2);
  });
  owner.join();
  freer.join();
}

// Every block of one thread freed by another: nothing is lost or freed twice,
// and runsel_stats sees every queued free (it takes the queues in).
TEST(RemoteFree, QueuedFreesAreAllTakenIn) {
  std::vector<void*> blocks(20000);
  const runsel_stats_t before = runsel_test::snapshot();
  freed_by_another_thread(
      blocks, [](size_t i) { return 16 + (i % 64) * 16; }, [] {});
  const runsel_stats_t after = runsel_test::snapshot();
  EXPECT_LE(after.allocated, before.allocated + 64 * 1024);
  EXPECT_TRUE(runsel_test::IdentityHolds(after));
  EXPECT_EQ(runsel_check(), 0);
}

// Large blocks (three pages: large in every build) freed by a thread of
// another arena: the free takes the owner's lock, or, in the fast profile, is
// queued as a region is. Either way a second free of the block aborts naming
// it: the owner's free (which takes the queue in first) or the remote
// thread's (which finds the queue's key in the block and takes the lock).
constexpr size_t kLargeBlock = 3 * 4096;

TEST(RemoteFree, ALargeBlockFreedByAnotherThreadThenByItsOwnerAborts) {
  const auto outcome = run_in_child(
      [] { owner_and_remote([](void* p) { free(p); }, [](void* p) { free(p); }, kLargeBlock); });
  EXPECT_TRUE(died_of_abort(outcome.status)) << outcome.err;
  EXPECT_NE(outcome.err.find(line_for(outcome.err, "double free")), std::string::npos)
      << outcome.err;
}

TEST(RemoteFree, ALargeBlockFreedTwiceByAnotherThreadAborts) {
  const auto outcome = run_in_child([] {
    owner_and_remote(
        [](void* p) {
          free(p);
          free(p);
        },
        [](void*) {}, kLargeBlock);
  });
  EXPECT_TRUE(died_of_abort(outcome.status)) << outcome.err;
  EXPECT_NE(outcome.err.find(line_for(outcome.err, "double free")), std::string::npos)
      << outcome.err;
}

// Large blocks of every length one thread allocated, all freed by another:
// each is freed once (nothing lost, nothing twice), and the owner's next
// large mallocs get their pages back.
TEST(RemoteFree, QueuedLargeFreesAreAllTakenIn) {
  std::vector<void*> blocks(600);
  const runsel_stats_t before = runsel_test::snapshot();
  const auto size_of = [](size_t i) { return 4097 + (i % 8) * 4096; };
  freed_by_another_thread(blocks, size_of, [&] {
    for (int round = 0; round < 3; ++round) {
      std::vector<void*> again;
      for (size_t i = 0; i < blocks.size(); ++i) again.push_back(opaque(malloc(size_of(i))));
      for (void* p : again) free(p);
    }
  });
  const runsel_stats_t after = runsel_test::snapshot();
  // What the fast profile's arenas keep of freed large runs counts as
  // allocated (thread_cached): at most 1.25 MiB an arena.
  EXPECT_LE(after.allocated - after.thread_cached, before.allocated + 64 * 1024);
  EXPECT_LE(after.thread_cached, after.narenas * (32 * (1 + 2 + 3 + 4) * size_t{4096}));
  EXPECT_TRUE(runsel_test::IdentityHolds(after));
  EXPECT_EQ(runsel_check(), 0);
}

TEST(RemoteFree, RunsOnTheExpectedVariant) { EXPECT_TRUE(runsel_test::RunsExpectedVariant()); }

}  // namespace
