// Threads with cross-thread frees: a main thread and workers (network, DOM workers,
// the compositor) exchange messages. Each side allocates what it sends and frees
// what it receives, so about half of all frees happen on a thread other than the
// one that allocated, and each thread also churns a private set it keeps across
// phases. A phase ends in barriers: after the first every thread drains its
// inbox, after the second the main thread takes a checkpoint while every worker
// waits for the third. The mailboxes are then empty and the live set is the threads' private
// sets, which depend only on each thread's own seeded sequence: every run, under
// every allocator, holds the same live bytes at every checkpoint. Which runs
// those bytes sit in still depends on how the threads interleaved.
#include <barrier>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "workload.h"

namespace {

using workload::Block;
using workload::BlockArray;
using workload::Heap;
using workload::Rng;

constexpr size_t kWorkers = 2;
constexpr size_t kPhases = 8;
constexpr size_t kMessagesPerPhase = 40000;

struct Mailbox {
  std::mutex lock;
  std::deque<Block> messages;

  void send(Block block) {
    std::lock_guard guard(lock);
    messages.push_back(block);
  }
  // Frees up to `limit` received messages; returns how many.
  size_t receive(Heap& heap, size_t limit) {
    size_t received = 0;
    while (received < limit) {
      Block block;
      {
        std::lock_guard guard(lock);
        if (messages.empty()) break;
        block = messages.front();
        messages.pop_front();
      }
      heap.release(block.address, block.size);
      ++received;
    }
    return received;
  }
};

size_t message_size(Rng& rng) {
  return rng.chance(0.01) ? rng.log_uniform(8 << 10, 64 << 10) : rng.log_uniform(32, 2048);
}

// One thread's share of a phase: send, receive now and then, churn the private
// set `own` (at most `own_limit` blocks).
void exchange(Heap& heap, Rng& rng, Mailbox& outbox, Mailbox& inbox, BlockArray& own,
              size_t messages, size_t own_limit) {
  for (size_t i = 0; i < messages; ++i) {
    size_t size = message_size(rng);
    outbox.send(Block{heap.allocate(size), size});
    if (i % 8 == 0) inbox.receive(heap, 8);
    size_t local = rng.log_uniform(16, 512);
    own.push(Block{heap.allocate(local), local});
    if (own.size() > own_limit) {
      Block old = own.take(rng.below(own.size()));
      heap.release(old.address, old.size);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  workload::Options options = workload::parse_options(argc, argv, "threads");
  workload::Recorder recorder("threads", options);
  Heap heap;
  size_t messages = workload::scaled(options, kMessagesPerPhase, 200);
  size_t own_limit = workload::scaled(options, 16000, 500);
  std::vector<Mailbox> to_main(kWorkers), to_worker(kWorkers);
  std::barrier phase_start(kWorkers + 1), phase_sent(kWorkers + 1), phase_end(kWorkers + 1);
  std::barrier checkpoint_taken(kWorkers + 1);

  auto work = [&] {
    std::vector<std::thread> workers;
    for (size_t w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        Rng rng(options.seed * 131 + w + 1);
        BlockArray own(heap);
        auto worker_work = [&] {
          for (size_t phase = 0; phase < kPhases; ++phase) {
            phase_start.arrive_and_wait();
            exchange(heap, rng, to_main[w], to_worker[w], own, messages, own_limit);
            phase_sent.arrive_and_wait();
            to_worker[w].receive(heap, SIZE_MAX);
            phase_end.arrive_and_wait();
            checkpoint_taken.arrive_and_wait();
          }
          own.release_all();
        };
        workload::run_measured_worker(worker_work);
      });
    }
    Rng rng(options.seed);
    BlockArray own(heap);
    char name[40];
    for (size_t phase = 1; phase <= kPhases; ++phase) {
      phase_start.arrive_and_wait();
      for (size_t w = 0; w < kWorkers; ++w)
        exchange(heap, rng, to_worker[w], to_main[w], own, messages / kWorkers, own_limit);
      phase_sent.arrive_and_wait();
      for (size_t w = 0; w < kWorkers; ++w) to_main[w].receive(heap, SIZE_MAX);
      phase_end.arrive_and_wait();
      std::snprintf(name, sizeof name, "phase_%zu", phase);
      recorder.checkpoint(name, heap, phase == kPhases);
      checkpoint_taken.arrive_and_wait();
    }
    for (auto& worker : workers) worker.join();
    own.release_all();
  };
  recorder.begin(heap);
  workload::run_measured(work);
  return recorder.finish(heap, "main + 2 workers exchanging messages; cross-thread frees",
                         /*deterministic=*/false);
}
