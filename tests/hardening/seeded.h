// Seeds, random numbers, scale and byte patterns for runsel's seeded tests.
// A test prints its seed; RUNSEL_TEST_SEED=<n> replays it, RUNSEL_STRESS=<k>
// multiplies its operation count (CI runs k = 1).
#ifndef RUNSEL_TESTS_SEEDED_H
#define RUNSEL_TESTS_SEEDED_H

#include <stdint.h>
#include <stdlib.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

namespace runsel_test {

inline size_t env_number(const char* name, size_t fallback) {
  const char* value = getenv(name);
  return value && *value ? strtoull(value, nullptr, 0) : fallback;
}

// RUNSEL_TEST_SEED if set, otherwise a fresh one from the clock.
inline uint64_t test_seed() {
  const char* value = getenv("RUNSEL_TEST_SEED");
  if (value && *value) return strtoull(value, nullptr, 0);
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
         0x9E3779B97F4A7C15ull;
}

inline std::string replay_hint(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay with RUNSEL_TEST_SEED=" + std::to_string(seed) +
         ")";
}

// Scale of the long runs: RUNSEL_STRESS (default 1).
inline size_t stress_factor() {
  size_t factor = env_number("RUNSEL_STRESS", 1);
  return factor ? factor : 1;
}

// splitmix64: small, fast, good enough to drive tests.
struct Random {
  uint64_t state;
  explicit Random(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool one_in(uint64_t n) { return below(n) == 0; }
};

// Word i of a block tagged `key` is pattern_word(key, i) (bytes in memory
// order): a different pattern per block, so a block handed out twice or
// overlapping another shows up on verification. Blocks are 8-byte aligned.
inline uint64_t pattern_word(uint64_t key, size_t word) {
  return key + word * 0xD1B54A32D192ED03ull;
}
inline unsigned char pattern_byte(uint64_t key, size_t i) {
  uint64_t word = pattern_word(key, i >> 3);
  unsigned char bytes[8];
  memcpy(bytes, &word, 8);
  return bytes[i & 7];
}

inline void fill_pattern(void* block, size_t begin, size_t end, uint64_t key) {
  unsigned char* bytes = static_cast<unsigned char*>(block);
  size_t i = begin;
  for (; i < end && (i & 7); ++i) bytes[i] = pattern_byte(key, i);
  for (; i + 8 <= end; i += 8) {
    uint64_t word = pattern_word(key, i >> 3);
    memcpy(bytes + i, &word, 8);
  }
  for (; i < end; ++i) bytes[i] = pattern_byte(key, i);
}

// Offset of the first wrong byte among the first `end`, or SIZE_MAX.
inline size_t first_mismatch(const void* block, size_t end, uint64_t key) {
  const unsigned char* bytes = static_cast<const unsigned char*>(block);
  size_t i = 0;
  for (; i + 8 <= end; i += 8) {
    uint64_t word;
    memcpy(&word, bytes + i, 8);
    if (word != pattern_word(key, i >> 3)) break;
  }
  for (; i < end; ++i)
    if (bytes[i] != pattern_byte(key, i)) return i;
  return SIZE_MAX;
}

// Hides a value's provenance so the compiler neither warns about deliberate
// misuse nor optimises it away.
template <class T>
T opaque(T value) {
  asm volatile("" : "+r"(value)::"memory");
  return value;
}

}  // namespace runsel_test

#endif
