// Replay of a recorded trace (tools/trace/format.md) as a harness workload: the
// calls a real program made, in the order it made them, on one thread. Unlike
// tools/trace/replay.cpp (runsel-replay-<container>, linked with one container),
// this program is not linked with runsel, so the harness runs the same trace under
// every allocator through LD_PRELOAD (`tools/runsel report --trace PATH`).
//
//   workload_replay --trace PATH [--every N] [--partial] [--seed N] [--scale X]
//                   [--no-introspection] [--out PATH]
//
// The whole trace is validated first with the reader of trace_format.h (a malformed
// one replays nothing: exit 2, the byte offset on stderr); then the replay runs
// inside the measured region, with a checkpoint at each mark record (named by its
// label, cut to 39 bytes, quotes and backslashes made '_'), every N records, and at
// the end; a trace without marks and without --every gets five evenly spaced. --scale below 1
// replays only that fraction of the records (the first ones); --seed is accepted and unused (a
// trace has no randomness). Recorded addresses are mapped to the replay's blocks in slot tables
// mmap'd and touched before "start", so they never change resident memory inside
// the measured region. Each block is written in full when allocated (calloc's with
// zeros; realloc keeps the copied bytes) and its first byte read when freed. Frees of unknown
// pointers are counted in the JSON ("replay": {"unknown_pointers": ...}), never fatal.
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "address_table.h"
#include "replay_engine.h"
#include "trace_format.h"
#include "workload.h"

namespace {

using namespace runsel::trace;
using workload::Heap;

// Blocks written as the program wrote them (replay_engine.h), counted in the heap;
// realloc(p, 0) makes the same calls under every allocator.
using Replay = ReplayEngine<WrittenBlocks<Heap, true>>;

// --- the command ------------------------------------------------------------------------

struct TraceOptions {
  const char* path = nullptr;
  uint64_t every = 0;
  bool partial = false;
};

// Takes --trace, --every and --partial out of argv; the rest are the common options.
TraceOptions take_trace_options(int& argc, char** argv) {
  TraceOptions options;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--trace") == 0 && has_value) {
      options.path = argv[++i];
    } else if (std::strcmp(argv[i], "--every") == 0 && has_value) {
      char* end = nullptr;
      options.every = std::strtoull(argv[++i], &end, 10);
      if (*end != 0 || options.every == 0) {
        std::fprintf(stderr, "workload_replay: --every needs a positive count\n");
        std::exit(2);
      }
    } else if (std::strcmp(argv[i], "--partial") == 0) {
      options.partial = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  if (options.path == nullptr) {
    std::fprintf(stderr,
                 "usage: %s --trace PATH [--every N] [--partial] [--seed N] [--scale X] "
                 "[--no-introspection] [--out PATH]\n"
                 "Replays a runsel trace (tools/trace/format.md) under whatever allocator "
                 "serves malloc and prints one JSON document.\n",
                 argv[0]);
    std::exit(2);
  }
  return options;
}

// The whole file, mapped read-only (no allocation). size 0 gives nullptr.
const uint8_t* map_file(const char* path, size_t& size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0) {
    if (fd >= 0) close(fd);
    return reinterpret_cast<const uint8_t*>(MAP_FAILED);
  }
  size = static_cast<size_t>(info.st_size);
  void* data = size == 0 ? nullptr : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  return static_cast<const uint8_t*>(data);
}

int reject(const char* path, const Problem& problem) {
  std::fprintf(stderr, "workload_replay: %s: malformed trace at byte offset %zu: %s\n", path,
               problem.offset, problem.what);
  return 2;
}

// A JSON string's contents: the file name only, quotes, backslashes and control
// characters replaced.
void json_name(const char* path, char* out, size_t room) {
  const char* slash = std::strrchr(path, '/');
  const char* name = slash ? slash + 1 : path;
  size_t n = 0;
  for (; *name != 0 && n + 1 < room; ++name)
    out[n++] =
        (*name == '"' || *name == '\\' || static_cast<unsigned char>(*name) < 0x20) ? '_' : *name;
  out[n] = 0;
}

}  // namespace

int main(int argc, char** argv) {
  TraceOptions trace = take_trace_options(argc, argv);
  workload::Options options = workload::parse_options(argc, argv, "replay");

  size_t size = 0;
  const uint8_t* data = map_file(trace.path, size);
  if (data == MAP_FAILED) {
    std::fprintf(stderr, "workload_replay: %s: %s\n", trace.path, std::strerror(errno));
    return 1;
  }
  TraceSurvey survey;
  if (!survey_trace(data, size, trace.partial, survey)) {
    if (survey.problem.what != nullptr) return reject(trace.path, survey.problem);
    std::fprintf(stderr,
                 "workload_replay: %s: cannot map %zu bytes for the survey's table of "
                 "live blocks at record %" PRIu64 ": %s\n",
                 trace.path, survey.table_failed_bytes, survey.records,
                 std::strerror(survey.table_failed_errno));
    return 2;
  }
  Header header = survey.header;
  uint64_t records = survey.records, marks = survey.marks;
  size_t peak_live = survey.peak_live_blocks;
  bool complete = survey.complete;

  uint64_t replayed = records;
  if (options.scale < 1) replayed = workload::scaled(options, records, records ? 1 : 0);
  uint64_t every = trace.every ? trace.every : marks ? 0 : (replayed + 5) / 6;  // five + end
  if (every == 0 && marks == 0) every = 1;

  workload::Recorder recorder("replay", options);
  Heap heap;
  Replay replay(peak_live, true, heap, peak_live);  // slots resident before "start"
  if (replay.slots().failed() || replay.blocks().sizes().failed()) {
    const AddressTable& failed = replay.slots().failed() ? replay.slots() : replay.blocks().sizes();
    std::fprintf(stderr, "workload_replay: %s: cannot map %zu bytes for a slot table: %s\n",
                 trace.path, failed.failed_bytes(), std::strerror(failed.failed_errno()));
    return 2;
  }
  Reader reader(data, size, trace.partial);
  reader.read_header(header);

  auto work = [&] {
    Record r;
    char name[40];
    while (replay.tally().ops < replayed && reader.next(r)) {
      replay.step(r);
      uint64_t ops = replay.tally().ops;
      if (r.op == Op::mark) {
        size_t n = 0;
        for (; n < r.label_length && n + 1 < sizeof name; ++n)
          name[n] = (r.label[n] == '"' || r.label[n] == '\\') ? '_' : r.label[n];
        name[n] = 0;
        recorder.checkpoint(name, heap, true);
      } else if (every != 0 && ops % every == 0 && ops < replayed) {
        std::snprintf(name, sizeof name, "ops_%" PRIu64, ops);
        recorder.checkpoint(name, heap, true);
      }
    }
  };
  recorder.begin(heap);
  workload::run_measured(work);

  static char notes[512], extra[1024], file[256];
  json_name(trace.path, file, sizeof file);
  const ReplayTally& tally = replay.tally();
  std::snprintf(notes, sizeof notes,
                "replay of %s (pid %" PRIu64 "%s): %" PRIu64 " of %" PRIu64 " records", file,
                header.pid, (header.flags & kFlagForkedChild) ? ", forked child" : "", tally.ops,
                records);
  std::snprintf(extra, sizeof extra,
                "\"replay\": {\"trace\": \"%s\", \"records\": %" PRIu64 ", \"ops\": %" PRIu64
                ", \"unknown_pointers\": %" PRIu64 ", \"failed\": %" PRIu64
                ", \"reused_live\": %" PRIu64
                ", \"live_blocks\": %zu, \"peak_live_blocks\": %zu"
                ", \"complete\": %s}",
                file, records, tally.ops, tally.unknown_pointers, tally.failed, tally.reused_live,
                replay.live(), peak_live, complete ? "true" : "false");
  return recorder.finish(heap, notes, true, extra);
}
