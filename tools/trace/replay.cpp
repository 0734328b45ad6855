// runsel-replay-<container>: replays a trace (tools/trace/format.md) against
// the runsel variant it is linked with, in recorded order on one thread, and
// prints stats every N operations and at the end, like mozjemalloc's replay.
//
// Exit codes: 0 replayed; 1 cannot read the file; 2 usage or malformed trace
// (the message gives the byte offset). Unknown pointers are counted, not fatal.
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "replay_engine.h"
#include "runsel.h"
#include "trace_format.h"

namespace {

using namespace runsel::trace;

// --- the report ------------------------------------------------------------------

// Anonymous resident memory (statm's resident minus shared): the heap and the
// slot table, not the mapped trace or the program text. open/read, not stdio:
// the replayer must not allocate.
std::size_t resident_anonymous_bytes() {
  char text[128] = {};
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(text, "%llu %llu %llu", &size, &resident, &shared) != 3) return 0;
  return static_cast<std::size_t>(resident - shared) *
         static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// One line per checkpoint; the same for every container that picks runs alike.
void print_stats_line(const char* label, std::uint64_t ops, const runsel_stats_t& s,
                      std::size_t slot_table) {
  std::printf("%s ops=%" PRIu64
              " mapped=%zu committed=%zu allocated=%zu waste=%zu dirty=%zu "
              "bookkeeping=%zu bin_unused=%zu\n",
              label, ops, s.mapped, s.committed, s.allocated, s.waste, s.dirty, s.bookkeeping,
              s.bin_unused);
  // Resident memory depends on the process, not only the allocator: own line.
  std::printf("resident ops=%" PRIu64 " bytes=%zu slot_table=%zu\n", ops,
              resident_anonymous_bytes(), slot_table);
}

void print_bin_table(const runsel_stats_t& s) {
  std::printf("bins:\n%8s %8s %9s %12s %10s %12s\n", "size", "runs", "non-full", "regions/run",
              "in use", "utilization");
  for (const runsel_bin_stats& bin : s.bins) {
    if (bin.runs == 0) continue;
    double capacity = static_cast<double>(bin.runs * bin.regions_per_run);
    std::printf("%8zu %8zu %9zu %12zu %10zu %11.1f%%\n", bin.size, bin.runs, bin.nonfull_runs,
                bin.regions_per_run, bin.regions_in_use,
                capacity > 0 ? 100.0 * static_cast<double>(bin.regions_in_use) / capacity : 0.0);
  }
}

void print_checkpoint(std::uint64_t ops, std::size_t slot_table) {
  runsel_stats_t stats;
  runsel_stats(&stats);
  print_stats_line("stats", ops, stats, slot_table);
  std::fflush(stdout);
}

void print_end(const ReplayTally& tally, std::size_t live, std::size_t slot_table) {
  runsel_stats_t stats;
  runsel_stats(&stats);
  print_stats_line("end", tally.ops, stats, slot_table);
  std::printf("replay ops=%" PRIu64 " unknown_pointers=%" PRIu64 " failed=%" PRIu64
              " reused_live=%" PRIu64 " live=%zu\n",
              tally.ops, tally.unknown_pointers, tally.failed, tally.reused_live, live);
  print_bin_table(stats);
  std::fflush(stdout);
}

// --- the command ----------------------------------------------------------------------

struct Options {
  const char* path = nullptr;
  std::uint64_t every = 0;
  bool partial = false;  // accept a trace cut short (its process crashed)
};

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--every N] [--partial] TRACE\n"
               "Replays TRACE against runsel (%s), printing stats every N operations "
               "(default: only at the end).\n"
               "--partial accepts a trace without its end record (its process was killed)\n"
               "and replays its complete records.\n",
               program, runsel_variant());
  return 2;
}

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--every") == 0 && i + 1 < argc) {
      char* end = nullptr;
      options.every = std::strtoull(argv[++i], &end, 10);
      if (*end != 0) return false;
    } else if (std::strcmp(argv[i], "--partial") == 0) {
      options.partial = true;
    } else if (argv[i][0] == '-' || options.path != nullptr) {
      return false;
    } else {
      options.path = argv[i];
    }
  }
  return options.path != nullptr;
}

// The whole file, mapped read-only (no allocation). size 0 gives nullptr.
const std::uint8_t* map_file(const char* path, std::size_t& size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0) return reinterpret_cast<const std::uint8_t*>(MAP_FAILED);
  size = static_cast<std::size_t>(info.st_size);
  void* data = size == 0 ? nullptr : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  return static_cast<const std::uint8_t*>(data);
}

// Chunk addresses decide which run "lowest address first" picks, and mmap's
// placement (so how chunks align and order) moves with address randomization:
// replay without it, so one trace gives the same stats on every run. Re-executes
// the replayer once; where personality() is refused it carries on randomized.
void without_address_randomization(char** argv) {
  int current = personality(0xffffffff);
  if (current == -1 || (current & ADDR_NO_RANDOMIZE)) return;
  if (personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE) == -1) return;
  execv("/proc/self/exe", argv);
}

int reject(const char* path, const Problem& problem) {
  std::fprintf(stderr, "runsel-replay: %s: malformed trace at byte offset %zu: %s\n", path,
               problem.offset, problem.what);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  static char output_buffer[1 << 16];  // stdio would otherwise malloc its buffer
  std::setvbuf(stdout, output_buffer, _IOFBF, sizeof output_buffer);
  without_address_randomization(argv);
  Options options;
  if (!parse(argc, argv, options)) return usage(argv[0]);
  std::size_t size = 0;
  const std::uint8_t* data = map_file(options.path, size);
  if (data == MAP_FAILED) {
    std::fprintf(stderr, "runsel-replay: %s: %s\n", options.path, std::strerror(errno));
    return 1;
  }

  // Validate the whole trace first, so a bad one replays nothing.
  Header header;
  Record record;
  Reader check(data, size, options.partial);
  if (!check.read_header(header)) return reject(options.path, check.problem());
  while (check.next(record)) {
  }
  if (check.failed()) return reject(options.path, check.problem());

  std::printf("# runsel-replay %s: %s (pid %" PRIu64 "%s), %" PRIu64 " records%s\n",
              runsel_variant(), options.path, header.pid,
              (header.flags & kFlagForkedChild) ? ", forked child" : "", check.records(),
              check.complete() ? "" : ", partial: no end record");
  ReplayEngine<UntouchedBlocks> replayer;  // blocks are only allocated and freed
  Reader reader(data, size, options.partial);
  reader.read_header(header);
  while (reader.next(record)) {
    replayer.step(record);
    if (record.op == Op::mark) {
      std::printf("mark %.*s\n", static_cast<int>(record.label_length), record.label);
      print_checkpoint(replayer.tally().ops, replayer.slot_table_bytes());
    }
    if (options.every != 0 && replayer.tally().ops % options.every == 0)
      print_checkpoint(replayer.tally().ops, replayer.slot_table_bytes());
  }
  print_end(replayer.tally(), replayer.live(), replayer.slot_table_bytes());
  return 0;
}
