// libFuzzer target: the API fuzzer of api_fuzzer.h with every choice (call,
// size, alignment, which live block) read from the fuzzer's input, so
// coverage of the allocator steers the sequences. Built by the fuzz build
// (clang, -Dfuzzing=true; see tests/hardening/meson.build), where the
// allocator core is instrumented for coverage and runs its checked walkers.
//
// A finding aborts with a message; libFuzzer then writes the input to
// crash-<sha1>, which replays with `fuzz_api_<container> crash-<sha1>`.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cstddef>
#include <string>

#include "api_fuzzer.h"
#include "runsel.h"

namespace {

using runsel_test::api_fuzz::Counts;
using runsel_test::api_fuzz::Fuzzer;

// Calls over every input of the run, printed when libFuzzer exits.
Counts total;
size_t inputs = 0;
void report_total() {
  fprintf(stderr, "runsel api fuzz: %zu inputs, %s\n", inputs,
          runsel_test::api_fuzz::describe(total).c_str());
}

// Choices read from the input bytes: below(n) takes as many bytes as n needs.
// An exhausted input reads as zeros; the driver stops at that point.
class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool exhausted() const { return used_ >= size_; }
  uint64_t below(uint64_t n) {
    if (n <= 1) return 0;
    unsigned bytes = (64 - __builtin_clzll(n - 1) + 7) / 8;
    return take(bytes) % n;
  }
  bool one_in(uint64_t n) { return below(n) == 0; }

 private:
  uint64_t take(unsigned bytes) {
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; ++i, ++used_)
      value = value << 8 | (used_ < size_ ? data_[used_] : 0);
    return value;
  }
  const uint8_t* data_;
  size_t size_;
  size_t used_ = 0;
};

[[noreturn]] void finding(const char* what, size_t step, const std::string& detail) {
  fprintf(stderr, "runsel api fuzz: %s at step %zu: %s\n", what, step, detail.c_str());
  abort();
}

}  // namespace

// Slots of live blocks: few, so inputs free and reuse what they made.
constexpr size_t kSlots = 16;
// runsel_check() (a walk of every chunk of every arena, compared with every
// counter) after each step of the first ones, then every kCheckEvery steps and
// at the end: it walks libFuzzer's own heap too, which grows with the corpus.
constexpr size_t kCheckedSteps = 64, kCheckEvery = 16;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  atexit(report_total);
  return 0;
}

// runsel_check(), counted; a failure is a finding.
static void check(const char* when, size_t step) {
  ++total.checks;
  if (runsel_check() != 0) finding("runsel_check() failed", step, when);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ++inputs;
  std::string error;
  size_t step = 0;
  {
    Fuzzer<ByteSource> fuzzer(ByteSource(data, size), kSlots, size);
    // Every step reads at least one byte (which slot), so this ends.
    while (!fuzzer.source().exhausted()) {
      if (!fuzzer.step(&error)) finding("wrong result", step, error);
      ++step;
      if (step <= kCheckedSteps || step % kCheckEvery == 0) check("after the step", step);
    }
    if (!fuzzer.verify_all(&error)) finding("corrupted block", step, error);
    fuzzer.release_all();
    const Counts& counts = fuzzer.counts();
    for (size_t i = 0; i < counts.calls.size(); ++i) total.calls[i] += counts.calls[i];
    total.refused += counts.refused;
    total.verified_bytes += counts.verified_bytes;
  }
  check("after freeing everything", step);
  return 0;
}
