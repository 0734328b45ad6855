// What the bench programs share: options, a seeded generator, the clock of the
// measured region and the one JSON line each prints (its allocator, proven as
// every experiment proves it, and what it did). Not linked with runsel: the
// same binary runs under every allocator through LD_PRELOAD.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "allocator_identity.h"

namespace bench_program {

struct Options {
  std::uint64_t seed = 1;
  double scale = 1.0;    // multiplies the operation counts; sizes stay the same
  unsigned threads = 0;  // 0: the program's default
  bool sized = false;    // --sized: free through sized operator delete
};

[[noreturn]] inline void usage(const char* name, const char* problem) {
  std::fprintf(stderr, "%s: %s\nusage: %s [--seed N] [--scale X] [--threads N] [--sized]\n", name,
               problem, name);
  std::exit(2);
}

inline Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const bool has_value = i + 1 < argc;
    char* end = nullptr;
    if (std::strcmp(arg, "--sized") == 0) {
      options.sized = true;
    } else if (std::strcmp(arg, "--seed") == 0 && has_value) {
      options.seed = std::strtoull(argv[++i], &end, 10);
      if (*end != '\0') usage(argv[0], "--seed wants a whole number");
    } else if (std::strcmp(arg, "--scale") == 0 && has_value) {
      options.scale = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(options.scale > 0)) usage(argv[0], "--scale wants a number above 0");
    } else if (std::strcmp(arg, "--threads") == 0 && has_value) {
      const long threads = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || threads < 1 || threads > 256) usage(argv[0], "--threads wants 1 to 256");
      options.threads = static_cast<unsigned>(threads);
    } else {
      usage(argv[0], (std::string("unknown argument ") + arg).c_str());
    }
  }
  return options;
}

inline std::size_t scaled(const Options& options, std::size_t count) {
  const double value = static_cast<double>(count) * options.scale;
  return value < 1 ? 1 : static_cast<std::size_t>(value);
}

// splitmix64: the same sequence on every machine and under every allocator.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t bound) { return static_cast<std::size_t>(next() % bound); }
  std::size_t between(std::size_t low, std::size_t high) { return low + below(high - low + 1); }
  // Log-uniform in [low, high]: most blocks small, as in real programs.
  std::size_t log_uniform(std::size_t low, std::size_t high) {
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    const double value = static_cast<double>(low) *
                         __builtin_exp(u * __builtin_log(static_cast<double>(high + 1) / low));
    const std::size_t size = static_cast<std::size_t>(value);
    return size > high ? high : size;
  }

 private:
  std::uint64_t state_;
};

// Writes the block's first bytes (a real program initialises what it
// allocates) and a tag its freer checks.
inline void stamp(void* block, std::size_t size, std::uint8_t tag) {
  std::memset(block, tag, size < 32 ? size : 32);
}
inline void expect_stamp(const void* block, std::uint8_t tag) {
  if (*static_cast<const std::uint8_t*>(block) != tag) {
    std::fprintf(stderr, "bench program: a block lost its contents (allocator bug)\n");
    std::abort();
  }
}

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// The process's peak resident memory in KiB (VmHWM: since exec, whereas a
// parent's ru_maxrss for its child also counts the forked parent before exec).
inline long peak_rss_kib() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib;
}

// One JSON line on stdout: the allocator that served malloc, the measured
// region's wall time, the operations it made (malloc + free), the threads, and
// the whole process's peak RSS and minor faults (all threads, at the end).
inline void report(const char* program, const Options& options, double seconds,
                   std::uint64_t operations, unsigned threads) {
  const experiments::AllocatorIdentity identity = experiments::detect_allocator();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf(
      "{\"program\": \"%s\", \"allocator\": {\"name\": \"%s\", \"provider\": \"%s\", "
      "\"purge\": \"%s\", \"profile\": \"%s\"}, \"seconds\": %.6f, \"operations\": %llu, "
      "\"threads\": %u, \"seed\": %llu, \"scale\": %g, \"sized\": %s, \"peak_rss_kib\": %ld, "
      "\"minor_faults\": %ld}\n",
      program, identity.name.c_str(), identity.provider.c_str(), identity.purge.c_str(),
      identity.profile.c_str(), seconds, static_cast<unsigned long long>(operations), threads,
      static_cast<unsigned long long>(options.seed), options.scale,
      options.sized ? "true" : "false", peak_rss_kib(), usage.ru_minflt);
}

}  // namespace bench_program
