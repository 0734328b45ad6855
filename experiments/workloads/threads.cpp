// Threads with cross-thread frees: a main thread and workers (network, DOM workers,
// the compositor) exchange messages. Each side allocates what it sends and frees
// what it receives, so about half of all frees happen on a thread other than the
// one that allocated, and each thread also churns privately. Phases end at a
// barrier, where the main thread takes a checkpoint while every worker waits.
// Allocation order across threads is not deterministic; each thread's own sequence is.
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

// One thread's share of a phase: send, receive, churn privately.
void exchange(Heap& heap, Rng& rng, Mailbox& outbox, Mailbox& inbox, size_t messages) {
  BlockArray own(heap);
  for (size_t i = 0; i < messages; ++i) {
    size_t size = message_size(rng);
    outbox.send(Block{heap.allocate(size), size});
    if (i % 8 == 0) inbox.receive(heap, 8);
    size_t local = rng.log_uniform(16, 512);
    own.push(Block{heap.allocate(local), local});
    if (own.size() > 2000) {
      Block old = own.take(rng.below(own.size()));
      heap.release(old.address, old.size);
    }
  }
  own.release_all();
}

}  // namespace

int main(int argc, char** argv) {
  workload::Options options = workload::parse_options(argc, argv, "threads");
  workload::Recorder recorder("threads", options);
  Heap heap;
  size_t messages = workload::scaled(options, kMessagesPerPhase, 200);
  std::vector<Mailbox> to_main(kWorkers), to_worker(kWorkers);
  std::barrier phase_start(kWorkers + 1), phase_end(kWorkers + 1);

  auto work = [&] {
    std::vector<std::thread> workers;
    for (size_t w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        Rng rng(options.seed * 131 + w + 1);
        auto worker_work = [&] {
          for (size_t phase = 0; phase < kPhases; ++phase) {
            phase_start.arrive_and_wait();
            exchange(heap, rng, to_main[w], to_worker[w], messages);
            phase_end.arrive_and_wait();
          }
        };
        workload::run_measured_worker(worker_work);
      });
    }
    Rng rng(options.seed);
    char name[40];
    for (size_t phase = 1; phase <= kPhases; ++phase) {
      phase_start.arrive_and_wait();
      for (size_t w = 0; w < kWorkers; ++w)
        exchange(heap, rng, to_worker[w], to_main[w], messages / kWorkers);
      phase_end.arrive_and_wait();
      for (size_t w = 0; w < kWorkers; ++w) {  // every thread is waiting: drain
        to_main[w].receive(heap, SIZE_MAX);
      }
      std::snprintf(name, sizeof name, "phase_%zu", phase);
      // Messages to workers stay queued across the checkpoint, as in-flight work.
      recorder.checkpoint(name, heap, phase == kPhases);
    }
    for (auto& worker : workers) worker.join();
    for (auto& mailbox : to_worker) mailbox.receive(heap, SIZE_MAX);
  };
  recorder.begin(heap);
  workload::run_measured(work);
  return recorder.finish(heap, "main + 2 workers exchanging messages; cross-thread frees",
                         /*deterministic=*/false);
}
