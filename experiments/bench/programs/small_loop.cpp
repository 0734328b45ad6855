// A single-thread small-block loop: a ring of 256 live blocks of 16-128 B;
// each operation frees a random one and allocates its replacement, the
// per-call cost of malloc and free with a working set that stays in cache.
#include <vector>

#include "program.h"

namespace {

using bench_program::Options;
using bench_program::Rng;

constexpr std::size_t kRing = 256;

}  // namespace

int main(int argc, char** argv) {
  const Options options = bench_program::parse_options(argc, argv);
  if (options.threads > 1) bench_program::usage(argv[0], "a single-thread program");
  const std::size_t operations = bench_program::scaled(options, 8000000);
  Rng rng(options.seed);
  std::vector<void*> ring(kRing);
  std::vector<std::uint8_t> tags(kRing);
  for (std::size_t i = 0; i < kRing; ++i) {
    const std::size_t size = rng.between(16, 128);
    ring[i] = std::malloc(size);
    tags[i] = static_cast<std::uint8_t>(size);
    bench_program::stamp(ring[i], size, tags[i]);
  }
  bench_program::Stopwatch clock;
  for (std::size_t i = 0; i < operations; ++i) {
    const std::size_t slot = rng.below(kRing);
    bench_program::expect_stamp(ring[slot], tags[slot]);
    std::free(ring[slot]);
    const std::size_t size = rng.between(16, 128);
    ring[slot] = std::malloc(size);
    tags[slot] = static_cast<std::uint8_t>(size);
    *static_cast<std::uint8_t*>(ring[slot]) = tags[slot];
  }
  const double seconds = clock.seconds();
  for (void* block : ring) std::free(block);
  bench_program::report("small_loop", options, seconds, 2 * operations, 1);
  return 0;
}
