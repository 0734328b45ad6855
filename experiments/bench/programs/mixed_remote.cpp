// Mixed sizes with cross-thread frees (the shape of rpmalloc's rptest): two
// threads, each with a working set of 4,096 slots of blocks of 8 B - 16 KiB
// (log-uniform: most small, some medium and page-sized). Each operation frees
// a random slot's block and allocates its replacement; every other new block
// is sent to the partner instead, in batches of 64, and the partner puts what
// it receives into its own slots. So about half of all frees are of blocks the
// other thread allocated, of every size up to four pages.
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "program.h"

namespace {

using bench_program::Options;
using bench_program::Rng;

constexpr std::size_t kSlots = 4096;
constexpr std::size_t kBatch = 64;
constexpr std::size_t kMaxPending = 16;  // batches in flight to one thread

struct Block {
  void* address = nullptr;
  std::uint8_t tag = 0;
};
using Batch = std::vector<Block>;

// What one thread receives: batches of blocks its partner allocated.
class Inbox {
 public:
  bool full() const { return pending_.load(std::memory_order_acquire) >= kMaxPending; }
  void put(Batch batch) {
    std::lock_guard guard(lock_);
    batches_.push_back(std::move(batch));
    pending_.store(batches_.size(), std::memory_order_release);
  }
  // Every batch waiting (none without taking the lock when there is none).
  std::vector<Batch> take() {
    if (pending_.load(std::memory_order_acquire) == 0) return {};
    std::lock_guard guard(lock_);
    std::vector<Batch> taken = std::move(batches_);
    batches_.clear();
    pending_.store(0, std::memory_order_release);
    return taken;
  }

 private:
  std::mutex lock_;
  std::vector<Batch> batches_;
  std::atomic<std::size_t> pending_{0};
};

class Worker {
 public:
  Worker(Inbox& own, Inbox& partner, std::uint64_t seed)
      : own_(own), partner_(partner), rng_(seed) {}

  // The whole life of the thread: fill its slots, run, and once both threads
  // have stopped sending (`running` counts those that have not), free the rest.
  void run(std::size_t operations, std::atomic<unsigned>& running) {
    slots_.resize(kSlots);
    for (Block& slot : slots_) slot = fresh();
    outbox_.reserve(kBatch);
    operate(operations);
    running.fetch_sub(1, std::memory_order_acq_rel);
    while (running.load(std::memory_order_acquire) != 0) {
      receive();
      std::this_thread::yield();
    }
    finish();
  }

 private:
  void operate(std::size_t operations) {
    for (std::size_t i = 0; i < operations; ++i) {
      receive();
      Block block = fresh();
      if (i % 2 == 1) {
        outbox_.push_back(block);
        if (outbox_.size() == kBatch) send();
      } else {
        replace(block);
      }
    }
  }

  // The thread's last blocks: its slots, what it did not send, and what it was
  // sent and did not take.
  void finish() {
    receive();
    for (Block& slot : slots_) release(slot);
    for (Block& block : outbox_) release(block);
  }

  Block fresh() {
    const std::size_t size = rng_.log_uniform(8, 16384);
    Block block{std::malloc(size), static_cast<std::uint8_t>(size)};
    bench_program::stamp(block.address, size, block.tag);
    return block;
  }
  static void release(Block& block) {
    if (block.address == nullptr) return;
    bench_program::expect_stamp(block.address, block.tag);
    std::free(block.address);
    block.address = nullptr;
  }
  void replace(Block block) {
    Block& slot = slots_[rng_.below(kSlots)];
    release(slot);
    slot = block;
  }
  void receive() {
    for (Batch& batch : own_.take())
      for (Block& block : batch) replace(block);
  }
  // Waits for room in the partner's inbox, taking in its own meanwhile (the
  // partner may be waiting for room in it).
  void send() {
    while (partner_.full()) {
      receive();
      std::this_thread::yield();
    }
    partner_.put(std::move(outbox_));
    outbox_ = Batch();
    outbox_.reserve(kBatch);
  }

  Inbox& own_;
  Inbox& partner_;
  Rng rng_;
  std::vector<Block> slots_;
  Batch outbox_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = bench_program::parse_options(argc, argv);
  if (options.threads != 0 && options.threads != 2) bench_program::usage(argv[0], "two threads");
  const std::size_t operations = bench_program::scaled(options, 1000000);  // per thread
  Inbox inboxes[2];
  Worker first(inboxes[0], inboxes[1], options.seed * 7919);
  Worker second(inboxes[1], inboxes[0], options.seed * 7919 + 1);
  std::atomic<unsigned> running{2};
  bench_program::Stopwatch clock;
  std::thread other([&] { second.run(operations, running); });
  first.run(operations, running);
  other.join();
  const double seconds = clock.seconds();
  bench_program::report("mixed_remote", options, seconds, 4 * operations, 2);
  return 0;
}
