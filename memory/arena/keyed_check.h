// Keyed check values for the metadata a buffer overflow in the program can
// reach: a run header's bin pointer (run.h) and a chunk header's first word
// (chunk.h).
//
// What it protects: a value written over the checked field without the key
// fails the check (1 in 2^32 passes by chance for the run header's 32-bit
// check). Neither function is linear in its inputs:
// - keyed_mix, the chunk canary's, multiplies between xor-shifts.
// - keyed_check32, the run header's, takes middle bits of a product of two
//   keyed factors.
// So one leaked header and the known distances between bins do not give the
// check of another bin at another run. An xor fold did: check ^ fold(bin ^
// bin') relabelled a run. What it does not protect: it is no cryptographic
// MAC. A program that can read arbitrary memory can read the key, which lives
// in arena metadata and in the process's AT_RANDOM bytes.
#pragma once

#include <cstdint>

namespace runsel {

inline std::uint64_t keyed_mix(std::uint64_t a, std::uint64_t b, std::uint64_t key) {
  std::uint64_t x = (a ^ key) * 0x9e3779b97f4a7c15u;
  x ^= (x >> 29) + b;
  x *= 0xbf58476d1ce4e5b9u;
  return x ^ (x >> 32);
}

// The run header's key: the key, and the key with its halves swapped (the
// second factor's), computed once when the arena is made rather than on
// every check.
struct RunKey {
  std::uint64_t key = 0;
  std::uint64_t rotated = 0;
  static RunKey from(std::uint64_t key) { return {key, (key << 32) | (key >> 32)}; }
};

// The run header's check, on every free: one multiplication of two
// key-dependent factors (the product's high half), so it stays off the
// critical path's length while keeping the check nonlinear in the bin pointer.
// keyed_check32_mixed takes the first factor with the key already mixed in
// (a ^ key.key): a bin computes its own once (arena.h's Bin::check_factor),
// so the containers' link checks skip that step.
inline std::uint32_t keyed_check32_mixed(std::uint64_t a_mixed, std::uint64_t b,
                                         std::uint64_t rotated) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a_mixed) * ((b ^ rotated) | 1);
  return static_cast<std::uint32_t>((product >> 64) ^ (product >> 32));
}
inline std::uint32_t keyed_check32(std::uint64_t a, std::uint64_t b, const RunKey& key) {
  return keyed_check32_mixed(a ^ key.key, b, key.rotated);
}

}  // namespace runsel
