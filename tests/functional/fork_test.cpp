// fork() while other threads allocate: parent and child keep a working, consistent allocator.
#include <gtest/gtest.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/seeds.h"

namespace {

using runsel_test::kMiB;
using runsel_test::opaque;
using runsel_test::snapshot;
using runsel_test::splitmix;

// The identity as a plain bool, for the forked child, which has no gtest.
bool identity_holds() {
  runsel_stats_t s = snapshot();
  return s.committed == runsel_test::identity_sum(s);
}

// Keeps 64 blocks alive and replaces a random one per step, so the thread
// is inside malloc or free most of the time.
void churn(std::atomic<bool>& stop, uint64_t seed) {
  void* slots[64] = {};
  uint64_t rng = seed;
  while (!stop.load(std::memory_order_relaxed)) {
    uint64_t r = splitmix(rng);
    size_t i = r % 64;
    free(slots[i]);
    r >>= 8;
    size_t size = r % 1000 == 0 ? 1032193 + r % kMiB
                  : r % 10 == 0 ? 4096 + r % 200000
                                : 1 + r % 3840;
    auto* p = static_cast<char*>(opaque(malloc(size)));
    p[0] = 1;
    p[size - 1] = 2;
    slots[i] = p;
  }
  for (void* p : slots) free(p);
}

// Exit codes of the child, so the parent can tell what went wrong.
enum ChildResult {
  kOk = 0,
  kMallocFailed = 10,
  kCorrupted,
  kCheckFailed,
  kIdentityBroken,
  kThreadFailed
};

int allocate_and_verify(uint64_t seed) {
  std::vector<std::pair<unsigned char*, size_t>> blocks;
  blocks.reserve(400);
  const size_t sizes[] = {16, 100, 3000, 5000, 70000, 1032192, 1032193, 3 * kMiB};
  for (int round = 0; round < 12; ++round) {
    for (size_t size : sizes) {
      size -= round % 7;
      auto* p = static_cast<unsigned char*>(opaque(malloc(size)));
      if (!p) return kMallocFailed;
      memset(p, static_cast<int>(seed + round),
             size < 65536 ? size : 65536);  // touch, but keep it quick
      p[size - 1] = p[0];
      blocks.emplace_back(p, size);
    }
    if (round % 2) {  // free half as we go
      for (size_t i = 0; i < blocks.size(); i += 2) {
        auto [p, n] = blocks[i];
        if (p[0] != static_cast<unsigned char>(p[n - 1])) return kCorrupted;
        free(p);
      }
      std::vector<std::pair<unsigned char*, size_t>> kept;
      for (size_t i = 1; i < blocks.size(); i += 2) kept.push_back(blocks[i]);
      blocks.swap(kept);
    }
  }
  for (auto [p, n] : blocks) free(p);
  return kOk;
}

void* child_thread(void* result) {
  *static_cast<int*>(result) = allocate_and_verify(7);
  return nullptr;
}

// Runs in the forked child: only async-signal-safe exits, no gtest.
[[noreturn]] void child_main(int iteration) {
  alarm(20);  // a deadlocked child dies of SIGALRM instead of hanging
  int result = allocate_and_verify(static_cast<uint64_t>(iteration));
  if (result == kOk) {
    int thread_result = -1;
    pthread_t thread;
    if (pthread_create(&thread, nullptr, child_thread, &thread_result) != 0 ||
        pthread_join(thread, nullptr) != 0 || thread_result != kOk)
      result = kThreadFailed;
  }
  if (result == kOk && runsel_check() != 0) result = kCheckFailed;
  if (result == kOk && !identity_holds()) result = kIdentityBroken;
  _exit(result);
}

TEST(Fork, WhileFourThreadsAllocate) {
  alarm(120);  // a deadlock in the parent fails the test instead of hanging it
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) workers.emplace_back(churn, std::ref(stop), 1000 + t);
  usleep(20000);
  for (int i = 0; i < 20; ++i) {
    fflush(nullptr);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) child_main(i);
    // The parent allocates while the child runs.
    void* p = opaque(malloc(1000 + i));
    ASSERT_NE(p, nullptr);
    free(p);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status))
        << "fork " << i << ": child killed by signal "
        << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
        << (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (deadlock)" : "");
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), kOk) << "fork " << i;
    }
    usleep(2000);
  }
  stop = true;
  for (std::thread& w : workers) w.join();
  alarm(0);
  EXPECT_EQ(allocate_and_verify(99), kOk);
  EXPECT_EQ(runsel_check(), 0);
  EXPECT_TRUE(identity_holds());
}

// A child of a child: fork handlers must leave the allocator forkable again.
TEST(Fork, NestedForkInAThreadedProcess) {
  alarm(60);
  std::atomic<bool> stop{false};
  std::thread worker(churn, std::ref(stop), 77);
  usleep(10000);
  fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);
    std::atomic<bool> child_stop{false};
    std::thread child_worker(churn, std::ref(child_stop), 78);
    pid_t grandchild = fork();
    if (grandchild == 0) child_main(100);
    int status = 0;
    bool ok = grandchild > 0 && waitpid(grandchild, &status, 0) == grandchild &&
              WIFEXITED(status) && WEXITSTATUS(status) == kOk;
    child_stop = true;
    child_worker.join();
    _exit(ok && runsel_check() == 0 ? kOk : kThreadFailed);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kOk) << "status " << status;
  stop = true;
  worker.join();
  alarm(0);
  EXPECT_EQ(runsel_check(), 0);
}

}  // namespace
