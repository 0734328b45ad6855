// Producer/consumer: every block is freed by a thread other than the one that
// allocated it. Each producer fills batches of blocks (16 B - 4 KiB,
// log-uniform) and hands them to its consumer through a bounded queue; the
// consumer checks and frees them. The queue moves a batch at a time, so its
// lock is taken once per 256 blocks and the allocator's remote frees dominate.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "program.h"

namespace {

using bench_program::Options;
using bench_program::Rng;

constexpr std::size_t kBatch = 256;
constexpr std::size_t kQueueBatches = 16;  // in flight per pair: 4,096 blocks

struct Block {
  void* address;
  std::size_t size;
};
using Batch = std::vector<Block>;

class Queue {
 public:
  void push(Batch batch) {
    std::unique_lock guard(lock_);
    not_full_.wait(guard, [&] { return batches_.size() < kQueueBatches; });
    batches_.push_back(std::move(batch));
    not_empty_.notify_one();
  }
  // An empty batch means the producer is done.
  Batch pop() {
    std::unique_lock guard(lock_);
    not_empty_.wait(guard, [&] { return !batches_.empty(); });
    Batch batch = std::move(batches_.front());
    batches_.pop_front();
    not_full_.notify_one();
    return batch;
  }

 private:
  std::mutex lock_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Batch> batches_;
};

void produce(Queue& queue, Rng rng, std::size_t blocks) {
  for (std::size_t sent = 0; sent < blocks;) {
    Batch batch;
    batch.reserve(kBatch);
    for (std::size_t i = 0; i < kBatch && sent < blocks; ++i, ++sent) {
      const std::size_t size = rng.log_uniform(16, 4096);
      void* address = std::malloc(size);
      bench_program::stamp(address, size, static_cast<std::uint8_t>(size));
      batch.push_back(Block{address, size});
    }
    queue.push(std::move(batch));
  }
  queue.push(Batch{});
}

void consume(Queue& queue) {
  for (;;) {
    Batch batch = queue.pop();
    if (batch.empty()) return;
    for (const Block& block : batch) {
      bench_program::expect_stamp(block.address, static_cast<std::uint8_t>(block.size));
      std::free(block.address);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = bench_program::parse_options(argc, argv);
  const unsigned pairs = options.threads ? (options.threads + 1) / 2 : 2;
  const std::size_t blocks = bench_program::scaled(options, 400000);  // per producer
  std::vector<Queue> queues(pairs);
  bench_program::Stopwatch clock;
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < pairs; ++p) {
    threads.emplace_back(produce, std::ref(queues[p]), Rng(options.seed * 7919 + p), blocks);
    threads.emplace_back(consume, std::ref(queues[p]));
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = clock.seconds();
  bench_program::report("producer_consumer", options, seconds, 2 * blocks * pairs, 2 * pairs);
  return 0;
}
