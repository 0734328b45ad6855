// Seeded API fuzzing: random sequences of every allocation call with edge-heavy
// sizes and alignments, a pattern in every live block, runsel_check() between steps.
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdio.h>

#include <string>

#include "api_fuzzer.h"
#include "runsel.h"
#include "support/heap.h"
#include "support/seeds.h"

namespace {

using namespace runsel_test;
using namespace runsel_test::api_fuzz;

// Runs `steps` calls over `slots` live blocks, runsel_check() every
// `check_every` steps and every live block verified every `verify_every`
// (the block a call touches is always verified first).
void fuzz(size_t steps, size_t slots, size_t check_every, size_t verify_every) {
  uint64_t seed = test_seed();
  SCOPED_TRACE(replay_hint(seed));
  printf("api fuzz: %s, %zu steps over %zu slots, check every %zu\n", replay_hint(seed).c_str(),
         steps, slots, check_every);
  Counts counts;
  {
    Fuzzer<Random> fuzzer(Random(seed), slots, seed);
    std::string error;
    for (size_t i = 0; i < steps; ++i) {
      ASSERT_TRUE(fuzzer.step(&error)) << "step " << i << ": " << error;
      if ((i + 1) % check_every == 0) {
        ASSERT_EQ(runsel_check(), 0) << "after step " << i;
      }
      if ((i + 1) % verify_every == 0) {
        ASSERT_TRUE(fuzzer.verify_all(&error)) << "after step " << i << ": " << error;
      }
    }
    fuzzer.release_all();
    counts = fuzzer.counts();
  }
  ASSERT_EQ(runsel_check(), 0) << "after freeing everything";
  counts.checks = steps / check_every + 1;
  printf("api fuzz: %s\n", describe(counts).c_str());
  testing::Test::RecordProperty("operations", std::to_string(counts.total()));
  // Every call was exercised.
  for (size_t i = 0; i < counts.calls.size(); ++i) EXPECT_GT(counts.calls[i], 0u) << kCallNames[i];
}

// Small mode: the heap is walked after every single call.
TEST(ApiFuzz, CheckedAfterEveryCall) { fuzz(scaled(4000), 64, 1, 64); }

// Bigger heap, checked every 256 calls. RUNSEL_STRESS=100 runs 20 million calls.
TEST(ApiFuzz, ManyCalls) { fuzz(scaled(200000), 512, 256, 4096); }

TEST(ApiFuzz, RunsOnTheExpectedVariant) { EXPECT_TRUE(runsel_test::RunsExpectedVariant()); }

}  // namespace
