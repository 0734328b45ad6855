// Byte patterns that prove a block's contents survived, and an optimizer
// barrier for deliberate misuse.
#pragma once

#include <stdint.h>

#include <cstddef>
#include <cstring>

namespace runsel_test {

// Hides a value (often a pointer) from the optimizer, so malloc/free pairs,
// impossible sizes and deliberate misuse are neither elided nor diagnosed at
// compile time.
template <class T>
T opaque(T value) {
  asm volatile("" : "+r"(value)::"memory");
  return value;
}

// Word i of a block tagged `key` is pattern_word(key, i) (bytes in memory
// order): a different pattern per block, so a block handed out twice or
// overlapping another shows up on verification.
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

// first_mismatch's answer when every byte is as filled.
constexpr size_t kNoMismatch = SIZE_MAX;

// Offset of the first wrong byte among the first `end`, or kNoMismatch.
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
  return kNoMismatch;
}

}  // namespace runsel_test
