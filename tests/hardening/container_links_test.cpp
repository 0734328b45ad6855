// A write into a run's container links: the 16 or 24 bytes behind the run
// header's `bin` (its check value untouched), or with
// -Dhook_placement=page_map the hook in the page map entry of the run's first
// page (a write into the chunk header), then the frees that empty that run,
// so that its container removes it. Under every container the child must die
// of SIGABRT with runsel's one line naming the run, before a link is
// followed: never a SIGSEGV, never a write through the links, never a quiet
// exit.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "arena/chunk.h"
#include "runsel.h"
#include "support/blocks.h"
#include "support/child.h"
#include "support/heap.h"

namespace {

using runsel_test::kChunk;
using runsel_test::kPage;
using runsel_test::opaque;

constexpr size_t kBlock = 16;  // runs of 16-byte regions are one page
// Where the links are, from the run's address: behind the 8-byte bin pointer,
// or in the run's page map entry, whose first three words are the hook.
char* hook_of(char* run) {
#if RUNSEL_HOOKS_IN_PAGE_MAP
  runsel::Chunk* chunk = runsel::Chunk::of(run);
  return reinterpret_cast<char*>(&chunk->map[chunk->page_index(run)].small.hook);
#else
  return run + 8;
#endif
}
constexpr int kTargetChanged = 42;  // the child's exit status if the write landed

enum class Payload { kChosenPointers, kRandomBytes, kAnotherRun };

struct Case {
  Payload payload;
  size_t bytes;  // written at hook_of(): two links, or the whole hook
  const char* name;
};
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

char* page_of(const void* p) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{kPage - 1});
}
uintptr_t chunk_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p) & ~uintptr_t{kChunk - 1};
}

// The heap the damage is done in, built in the test process before the fork:
// runs of 16-byte regions that are wholly ours, the first and the last full,
// those between with a few regions freed (so the bin's container holds
// several runs); the victim is one of those, and `other` a block of another
// size class in the victim's chunk.
struct Heap {
  std::vector<char*> blocks;  // everything to free afterwards
  char* victim = nullptr;     // the run header to damage
  std::vector<char*> victim_blocks;
  char* other = nullptr;  // a 64-byte block, in a run of another bin
  std::string why_not;    // set when the heap could not be built

  Heap() {
    runsel_stats_t stats;
    runsel_stats(&stats);
    const runsel_bin_stats& bin = stats.bins[0];
    if (bin.size != kBlock || bin.bytes_per_run != kPage) {
      why_not = "the 16-byte class's runs are not one page";
      return;
    }
    other = static_cast<char*>(opaque(malloc(64)));
    std::map<char*, std::vector<char*>> by_run;
    for (size_t i = 0; i < 12 * bin.regions_per_run; ++i) {
      char* p = static_cast<char*>(opaque(malloc(kBlock)));
      by_run[page_of(p)].push_back(p);
    }
    std::vector<char*> whole;  // runs all of whose regions are ours
    for (auto& [run, in_run] : by_run) {
      if (in_run.size() == bin.regions_per_run && chunk_of(run) == chunk_of(other))
        whole.push_back(run);
      blocks.insert(blocks.end(), in_run.begin(), in_run.end());
    }
    if (whole.size() < 8) {
      why_not = "fewer than 8 whole runs of 16-byte regions in one chunk with the 64-byte block";
      return;
    }
    // Runs 1..6 lose 1..6 regions; 0 and 7 stay full.
    for (size_t r = 1; r <= 6; ++r) {
      std::vector<char*>& in_run = by_run[whole[r]];
      for (size_t k = 0; k < r; ++k) {
        char* p = in_run.back();
        in_run.pop_back();
        free(p);
        blocks.erase(std::find(blocks.begin(), blocks.end(), p));
      }
    }
    // A thread cache would keep the freed regions: they go back to their runs,
    // so that the bin's container holds runs 1..6 (a no-op without the cache).
    runsel_thread_cache_flush();
    victim = whole[3];
    victim_blocks = by_run[victim];
  }

  ~Heap() {
    for (char* p : blocks) free(p);
    free(other);
  }
};

// In the child: writes the payload over the victim's links, frees every
// block of the victim (its last free makes the container erase it), then
// churns the bin. Returns only if nothing stopped it; exits with
// kTargetChanged if a write through the links reached `target`. A watchdog
// (SIGALRM) ends a child that loops in damaged links.
void damage_then_empty(const Heap& heap, const Case& c) {
  alarm(20);
  uintptr_t target[4] = {};  // where the chosen pointers point
  auto target_changed = [&] {
    return opaque(target[0]) != 0 || target[1] != 0 || target[2] != 0 || target[3] != 0;
  };
  unsigned char payload[24];
  if (c.payload == Payload::kChosenPointers) {
    // As a list's links (prev at hook + 0, next at hook + 8): prev->next
    // would be target[1] and next->prev target[2].
    const uintptr_t base = reinterpret_cast<uintptr_t>(target);
    const uintptr_t words[3] = {base - 8, base + 8, base + 24};
    memcpy(payload, words, sizeof words);
  } else if (c.payload == Payload::kRandomBytes) {
    std::mt19937_64 rng(0x11A4C5 + c.bytes);
    for (unsigned char& byte : payload) byte = static_cast<unsigned char>(rng());
  } else {
    // The header of a run of another bin in the same chunk, an address inside
    // that run, and the victim's own first block.
    void* words[3] = {page_of(heap.other), heap.other, heap.victim_blocks[0]};
    memcpy(payload, words, sizeof words);
  }
  memcpy(opaque(hook_of(heap.victim)), payload, c.bytes);
  for (char* p : heap.victim_blocks) free(opaque(p));
  runsel_thread_cache_flush();  // a thread cache's regions reach the victim
  if (target_changed()) _exit(kTargetChanged);
  std::vector<void*> churn;
  for (int i = 0; i < 2000; ++i) churn.push_back(opaque(malloc(kBlock)));
  for (void* p : churn) free(p);
  _exit(target_changed() ? kTargetChanged : 0);
}

class ContainerLinks : public testing::TestWithParam<Case> {};

TEST_P(ContainerLinks, DamagedLinksAbortNamingTheRun) {
  const Case& c = GetParam();
  Heap heap;
  ASSERT_EQ(heap.why_not, "");
  const runsel_test::ChildOutcome child =
      runsel_test::run_in_child([&] { damage_then_empty(heap, c); });
  char victim[32];
  snprintf(victim, sizeof victim, "%p", static_cast<void*>(heap.victim));
  ASSERT_FALSE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == kTargetChanged)
      << "a write through the damaged links reached the chosen address";
  ASSERT_FALSE(WIFSIGNALED(child.status) && WTERMSIG(child.status) == SIGSEGV)
      << "the child followed a damaged link (SIGSEGV); stderr: " << child.err;
  EXPECT_TRUE(runsel_test::died_of_abort(child.status))
      << "status " << child.status << ", stderr: " << child.err;
  // One line, naming the victim: as the run whose link failed, or as the
  // run whose back link disagreed with a neighbour's.
  static const std::regex kLine(
      "runsel: run 0x[0-9a-f]+: container links damaged \\(a write into its header"
      "(, or into run 0x[0-9a-f]+'s)?\\?\\)\n");
  EXPECT_TRUE(std::regex_match(child.err, kLine)) << child.err;
  EXPECT_NE(child.err.find(victim), std::string::npos)
      << "the line does not name the damaged run " << victim << ": " << child.err;
  printf("observed: %s", child.err.c_str());
}

INSTANTIATE_TEST_SUITE_P(Writes, ContainerLinks,
                         testing::Values(Case{Payload::kChosenPointers, 16, "ChosenPointers16"},
                                         Case{Payload::kChosenPointers, 24, "ChosenPointers24"},
                                         Case{Payload::kRandomBytes, 16, "RandomBytes16"},
                                         Case{Payload::kRandomBytes, 24, "RandomBytes24"},
                                         Case{Payload::kAnotherRun, 16, "AnotherRun16"},
                                         Case{Payload::kAnotherRun, 24, "AnotherRun24"}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(ContainerLinks, RunsOnTheExpectedVariant) { EXPECT_TRUE(runsel_test::RunsExpectedVariant()); }

}  // namespace
