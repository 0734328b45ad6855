// Helpers shared by the functional tests: sizes, an optimizer barrier, stats checks, seeds, RSS.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>

#include "runsel.h"

namespace test_support {

inline constexpr size_t kPage = 4096;
inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr size_t kChunk = kMiB;  // runsel's chunk size

// Hides a value (often a pointer) from the optimizer, so malloc/free pairs,
// impossible sizes and deliberate misuse are neither elided nor diagnosed at
// compile time.
template <class T>
T opaque(T value) {
  asm volatile("" : "+r"(value)::"memory");
  return value;
}

inline runsel_stats_t snapshot() {
  runsel_stats_t s;
  runsel_stats(&s);
  return s;
}

// The right-hand side of the identity below.
inline size_t identity_sum(const runsel_stats_t& s) {
  return s.allocated + s.waste + s.dirty + s.bookkeeping + s.bin_unused;
}

// committed == allocated + waste + dirty + bookkeeping + bin_unused, exactly.
inline testing::AssertionResult IdentityHolds(const runsel_stats_t& s) {
  size_t sum = identity_sum(s);
  if (s.committed == sum) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "committed " << s.committed << " != allocated " << s.allocated << " + waste " << s.waste
         << " + dirty " << s.dirty << " + bookkeeping " << s.bookkeeping << " + bin_unused "
         << s.bin_unused << " = " << sum;
}

// splitmix64: a small, seedable random sequence.
inline uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A number from the environment (RUNSEL_STRESS, RUNSEL_TEST_SEED), or fallback.
inline size_t env_number(const char* name, size_t fallback) {
  const char* value = getenv(name);
  return value && *value ? strtoull(value, nullptr, 0) : fallback;
}

// Resident memory of this process, from /proc/self/statm. Reads without
// stdio, which would allocate and free, leaving dirty pages behind.
inline size_t resident_bytes() {
  char text[128] = {};
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t length = read(fd, text, sizeof text - 1);
  close(fd);
  if (length <= 0) return 0;
  char* after_total = nullptr;
  strtoul(text, &after_total, 10);
  return strtoul(after_total, nullptr, 10) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace test_support
