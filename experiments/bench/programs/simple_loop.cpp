// Small malloc/free pairs in one thread, in the shape of glibc's
// bench-malloc-simple: allocate a batch of blocks of one small size, then free
// them all in the order they came, again and again. Batches of 25, 100, 400
// and 1,600 blocks of 16, 32, 64 and 128 bytes take turns, so the loop meets
// both a working set that a cache holds and one that spills to the runs.
#include <vector>

#include "program.h"

namespace {

using bench_program::Options;

constexpr std::size_t kSizes[] = {16, 32, 64, 128};
constexpr std::size_t kBatches[] = {25, 100, 400, 1600};

}  // namespace

int main(int argc, char** argv) {
  const Options options = bench_program::parse_options(argc, argv);
  if (options.threads > 1) bench_program::usage(argv[0], "a single-thread program");
  const std::size_t pairs = bench_program::scaled(options, 8000000);
  std::vector<void*> blocks(kBatches[3]);
  std::size_t done = 0;
  std::size_t turn = static_cast<std::size_t>(options.seed);
  bench_program::Stopwatch clock;
  while (done < pairs) {
    const std::size_t size = kSizes[turn % 4];
    const std::size_t count = kBatches[(turn / 4) % 4];
    ++turn;
    const auto tag = static_cast<std::uint8_t>(size + count);
    for (std::size_t i = 0; i < count; ++i) {
      blocks[i] = std::malloc(size);
      *static_cast<std::uint8_t*>(blocks[i]) = tag;
    }
    for (std::size_t i = 0; i < count; ++i) {
      bench_program::expect_stamp(blocks[i], tag);
      std::free(blocks[i]);
    }
    done += count;
  }
  const double seconds = clock.seconds();
  bench_program::report("simple_loop", options, seconds, 2 * done, 1);
  return 0;
}
