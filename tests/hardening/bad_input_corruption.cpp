// Bad input that damages metadata: an overflow into the next run's header, a
// forged run header, an overflow past a huge block into the next chunk's
// header, any value in a chunk header's first word.
#include "bad_input.h"

namespace bad_input {
namespace {

// A one-byte heap overflow: the byte after a run's last region is the lowest
// byte of the next run's header (its bin pointer). Each of the 256 values is
// written in a child of its own, which then frees a block of that run: every
// value that changes the byte must abort with the one line naming the run;
// the unchanged value (the control) must carry on.
std::string overflow_into_run_header() {
  constexpr size_t kSize = 64;
  runsel_stats_t stats;
  runsel_stats(&stats);
  const runsel_bin_stats& bin = stats.bins[kSize / 16 - 1];
  const size_t reg0_offset = bin.bytes_per_run - bin.regions_per_run * kSize;
  std::vector<char*> blocks;
  for (size_t i = 0; i < 6 * bin.regions_per_run; ++i)
    blocks.push_back(static_cast<char*>(malloc(kSize)));
  char* header = nullptr;  // of a run that directly follows one of our blocks
  char* victim = nullptr;  // that run's first region, ours too
  for (char* b : blocks) {
    if ((reinterpret_cast<uintptr_t>(b + kSize) & 4095) != 0) continue;
    for (char* c : blocks)
      if (c == b + kSize + reg0_offset) header = b + kSize, victim = c;
    if (victim) break;
  }
  std::string why;
  if (!victim) why = "no two adjacent runs of 64-byte regions among our blocks";
  const unsigned char original = victim ? static_cast<unsigned char>(*header) : 0;
  char expected[256];
  snprintf(expected, sizeof expected,
           "runsel: free(%p): heap corruption: the header of run %p is damaged (a write past the "
           "end of the block before it?)\n",
           static_cast<void*>(victim), static_cast<void*>(header));
  for (int value = 0; value < 256 && why.empty(); ++value) {
    const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
      *opaque(header) = static_cast<char>(value);  // the overflow
      free(opaque(victim));
    });
    const int status = child.status;
    const std::string& err = child.err;
    const bool aborted = runsel_test::died_of_abort(status);
    const bool carried_on = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char what[64];
    snprintf(what, sizeof what, "byte 0x%02x (was 0x%02x): ", value, original);
    if (value == original) {
      if (!carried_on || !err.empty()) why = what + std::string("the unchanged header was refused");
    } else if (!aborted || err != expected) {
      why = what + std::string("status ") + std::to_string(status) + ", stderr \"" + err + "\"";
    }
  }
  for (char* b : blocks) free(b);
  return why;
}

// A run header as the allocator lays it out (memory/arena/run.h): the bin
// pointer at offset 0, the 24-byte container hook with -Dhook_placement=
// run_header, the free count and hint, then the 32-bit check value.
#if RUNSEL_HOOKS_IN_PAGE_MAP
constexpr size_t kRunCheckOffset = 12;
#else
constexpr size_t kRunCheckOffset = 36;
#endif

// A header forged for another bin from one leaked header: with a check that
// is linear in the bin pointer (an xor fold), check ^ fold(bin16 ^ bin32)
// relabels a run of 16-byte regions as one of 32-byte regions. The free of a
// block in the forged run must abort naming the run.
std::string forged_run_header() {
  std::vector<char*> small, wider;
  for (int i = 0; i < 2000; ++i) small.push_back(static_cast<char*>(malloc(16)));
  for (int i = 0; i < 2000; ++i) wider.push_back(static_cast<char*>(malloc(32)));
  // Runs of both classes are one page (256 and 128 regions): the header is at the page start.
  char* run16 =
      reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(small[1000]) & ~uintptr_t{4095});
  char* run32 =
      reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(wider[1000]) & ~uintptr_t{4095});
  uint64_t bin16, bin32;
  uint32_t check16;
  memcpy(&bin16, run16, 8);
  memcpy(&bin32, run32, 8);
  memcpy(&check16, run16 + kRunCheckOffset, 4);
  const uint64_t delta = bin16 ^ bin32;
  const uint32_t forged_check = check16 ^ static_cast<uint32_t>(delta ^ (delta >> 32));
  char expected[256];
  snprintf(expected, sizeof expected,
           "runsel: free(%p): heap corruption: the header of run %p is damaged (a write past the "
           "end of the block before it?)\n",
           static_cast<void*>(small[1000]), static_cast<void*>(run16));
  const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
    memcpy(opaque(run16), &bin32, 8);
    memcpy(opaque(run16 + kRunCheckOffset), &forged_check, 4);
    free(opaque(small[1000]));
  });
  std::string why;
  if (!runsel_test::died_of_abort(child.status) || child.err != expected)
    why = "status " + std::to_string(child.status) + ", stderr \"" + child.err + "\"";
  for (char* b : small) free(b);
  for (char* b : wider) free(b);
  return why;
}

// The first word of a chunk header is where a write past the block before
// the chunk lands. Finds a huge block (2 MiB, which fills its mapping) that
// ends where an arena chunk begins: the chunk of a 1,008 KiB large block,
// which takes a chunk of its own. Frees what it allocated when it goes.
struct HugeBlockBeforeAChunk {
  std::vector<void*> keep;
  char* huge = nullptr;
  char* chunk = nullptr;
  char* large = nullptr;  // the block in that chunk
  std::string overflow_message;

  HugeBlockBeforeAChunk() {
    // keep holds (large, huge) pairs; a new block may end right before an
    // earlier chunk, or start a chunk right after an earlier huge block.
    const auto chunk_of = [](void* p) {
      return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) & ~(kChunk - 1));
    };
    const auto adjacent = [&](size_t h, size_t l) {
      if (static_cast<char*>(keep[h]) + 2 * kChunk != chunk_of(keep[l])) return false;
      huge = static_cast<char*>(keep[h]), chunk = chunk_of(keep[l]);
      large = static_cast<char*>(keep[l]);
      return true;
    };
    for (int i = 0; i < 512 && huge == nullptr; ++i) {
      keep.push_back(malloc(1008 * 1024));
      keep.push_back(malloc(2 * kChunk));
      const size_t new_large = keep.size() - 2, new_huge = keep.size() - 1;
      for (size_t j = 0; j < keep.size() && huge == nullptr; j += 2)
        if (!adjacent(new_huge, j)) adjacent(j + 1, new_large);
    }
    char text[256];
    snprintf(text, sizeof text,
             "runsel: free(%p): heap corruption: a write past the end of this huge allocation "
             "damaged the header of the chunk after it\n",
             static_cast<void*>(huge));
    overflow_message = text;
  }
  ~HugeBlockBeforeAChunk() {
    for (void* b : keep) free(b);
  }
  HugeBlockBeforeAChunk(const HugeBlockBeforeAChunk&) = delete;
  HugeBlockBeforeAChunk& operator=(const HugeBlockBeforeAChunk&) = delete;

  // In a child: `value` written at `at`, then the program carries on in the
  // chunk (a large free, small blocks) and frees the huge block. Either it
  // aborts with `expected`, or it exits 0 with the heap walker content.
  // Returns what went wrong, or "".
  std::string change_then_carry_on(char* at, int value, const std::string& expected) const {
    const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
      *opaque(at) = static_cast<char>(value);
      free(opaque(large));
      std::vector<void*> blocks;
      for (int i = 0; i < 300; ++i) blocks.push_back(malloc(16 + i % 2000));
      for (void* b : blocks) free(b);
      free(opaque(huge));
      if (runsel_check() != 0) _exit(7);
    });
    const bool carried_on = WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0;
    if (carried_on && child.err.empty()) return "";
    if (runsel_test::died_of_abort(child.status) && child.err == expected) return "";
    char what[64];
    snprintf(what, sizeof what, "value 0x%02x at %p: ", value, static_cast<void*>(at));
    return what + std::string("status ") + std::to_string(child.status) + ", stderr \"" +
           child.err + "\"";
  }
};

// The byte after a huge block: every value that changes it aborts when the
// huge block is freed, naming it.
std::string overflow_past_huge_block() {
  const HugeBlockBeforeAChunk setup;
  if (setup.huge == nullptr) return "no huge block right before a chunk";
  std::string why;
  const int original = static_cast<unsigned char>(*setup.chunk);
  for (int value = 0; value < 256 && why.empty(); ++value) {
    const bool changed = value != original;
    why = setup.change_then_carry_on(setup.chunk, value, changed ? setup.overflow_message : "");
    if (why.empty() && changed) {
      // A changed byte must not pass unseen: the child must have aborted.
      const runsel_test::ChildOutcome child = runsel_test::run_in_child([&] {
        *opaque(setup.chunk) = static_cast<char>(value);
        free(opaque(setup.huge));
      });
      if (!runsel_test::died_of_abort(child.status)) why = "an overflow went unseen";
    }
  }
  return why;
}

// Each byte of a chunk header's first word (once the arena pointer), each
// value: the program carries on correct (free never follows that word) or
// aborts with runsel's line.
std::string chunk_header_first_word() {
  const HugeBlockBeforeAChunk setup;
  if (setup.huge == nullptr) return "no huge block right before a chunk";
  std::string why;
  for (int byte = 0; byte < 8 && why.empty(); ++byte)
    for (int value = 0; value < 256 && why.empty(); ++value)
      why = setup.change_then_carry_on(setup.chunk + byte, value, setup.overflow_message);
  return why;
}

}  // namespace

std::vector<Row> corruption_rows() {
  return {
      {"a one-byte overflow past a small block into the next run's header, then a free of a "
       "block in that run (each of the 255 values that change the byte)",
       "abort (SIGABRT), one line: `runsel: free(P): heap corruption: the header of run R is "
       "damaged (a write past the end of the block before it?)`, R the run",
       nullptr, nullptr, nullptr, overflow_into_run_header},
      {"a run header forged for another bin from one leaked header (16-byte run relabelled "
       "as 32-byte, its check adjusted by the two bins' xor distance), then a free in that run",
       "abort (SIGABRT), one line: `runsel: free(P): heap corruption: the header of run R is "
       "damaged (a write past the end of the block before it?)`, R the run",
       nullptr, nullptr, nullptr, forged_run_header},
      {"a one-byte overflow past a huge block that fills its mapping, into the header of the "
       "chunk after it (each of the 255 values that change the byte), then the program goes on "
       "and frees the huge block",
       "abort (SIGABRT) at that free, one line: `runsel: free(P): heap corruption: a write past "
       "the end of this huge allocation damaged the header of the chunk after it`",
       nullptr, nullptr, nullptr, overflow_past_huge_block},
      {"any value in any of the 8 bytes of a chunk header's first word (where the arena pointer "
       "was), then frees and allocations in that chunk",
       "carries on correct (`runsel_check` finds the heap intact: the arena comes from the chunk "
       "registry, never from the header), or aborts with the line above if a huge block before "
       "the chunk is freed",
       nullptr, nullptr, nullptr, chunk_header_first_word},
  };
}

}  // namespace bad_input
