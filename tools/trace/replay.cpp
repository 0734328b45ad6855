// runsel-replay-<container>: replays a trace (tools/trace/format.md) against the
// runsel variant it is linked with, in recorded order on one thread, writing each
// block as the program did, and reports exact figures at each mark, every N
// records, at the peak of live bytes and at the end (text, and JSON with --json),
// with the resident memory a forced purge would leave (measured in a forked copy,
// so the replay itself goes on unchanged). Under callgrind, --windows K
// --window-records W counts only K evenly spread windows of W records.
//
// Exit codes: 0 replayed; 1 cannot open the file; 2 usage, a malformed trace
// (the message gives the byte offset), a replay that would hold more than the
// memory it may use (its slot tables always; its live blocks unless
// --allow-large-live-set), or a mapping of its own that could not be had (the
// trace's, a slot table's): one line on stderr. Unknown pointers are counted, not
// fatal; so are allocations the replay could not have.
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "replay_engine.h"
#include "replay_resident.h"
#include "runsel.h"
#include "trace_format.h"

namespace {

using namespace runsel::trace;

// --- what the replay reports ---------------------------------------------------------

// Output to a file descriptor through a static buffer (stdio's FILE would malloc).
class Output {
 public:
  void open(int fd) { fd_ = fd; }
  bool active() const { return fd_ >= 0; }
  void print(const char* format, ...) __attribute__((format(printf, 2, 3))) {
    if (fd_ < 0) return;
    if (used_ + kLine > sizeof buffer_) flush();
    va_list args;
    va_start(args, format);
    int n = std::vsnprintf(buffer_ + used_, sizeof buffer_ - used_, format, args);
    va_end(args);
    if (n > 0)
      used_ += static_cast<std::size_t>(n) < sizeof buffer_ - used_ ? static_cast<std::size_t>(n)
                                                                    : sizeof buffer_ - used_ - 1;
  }
  // A JSON string: the label's bytes are printable ASCII; quote and backslash escaped.
  void string(const char* text, std::size_t length) {
    print("\"");
    for (std::size_t i = 0; i < length; ++i)
      print(text[i] == '"' || text[i] == '\\' ? "\\%c" : "%c", text[i]);
    print("\"");
  }
  void touch() { std::memset(buffer_ + used_, 0, sizeof buffer_ - used_); }
  void flush() {
    for (std::size_t done = 0; done < used_;) {
      ssize_t n = write(fd_, buffer_ + done, used_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    used_ = 0;
  }

 private:
  static constexpr std::size_t kLine = 1024;  // no single print is longer
  int fd_ = -1;
  char buffer_[1 << 16];
  std::size_t used_ = 0;
};

Output json;
runsel_stats_t stats;  // static: the replayer must not allocate, and its pages count early

// What a forced purge (every dirty page, kept empty run and cached huge mapping given
// back: runsel_free_dirty_pages, as malloc_trim) would leave, the analogue of AWSY's
// "after minimizing memory". Measured in a forked copy of the replay, which purges,
// measures and exits, so the replay's own state (and every later figure) is the same
// as without it. Not under valgrind (its child would write a profile too).
struct Purged {
  bool measured = false;
  std::size_t resident = 0;
  std::size_t committed = 0;
};

Purged purged_copy(const HeapResident& resident) {
  Purged purged;
  if (RUNNING_ON_VALGRIND) return purged;
  int channel[2];
  if (pipe(channel) != 0) return purged;
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    close(channel[0]);
    runsel_free_dirty_pages();
    runsel_stats(&stats);
    Purged figures{true, resident.now(), stats.committed};
    ssize_t written = write(channel[1], &figures, sizeof figures);
    _exit(written == static_cast<ssize_t>(sizeof figures) ? 0 : 1);
  }
  close(channel[1]);
  if (child > 0) {
    Purged figures;
    ssize_t got = read(channel[0], &figures, sizeof figures);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (got == static_cast<ssize_t>(sizeof figures) && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0)
      purged = figures;
  }
  close(channel[0]);
  return purged;
}

enum class Kind { mark, every, peak, end };
const char* kind_name(Kind kind) {
  static const char* const names[] = {"mark", "every", "peak", "end"};
  return names[static_cast<int>(kind)];
}

// A counting library's pick counters of one bin (cumulative since start), as JSON members.
void print_pick_counters(const runsel_bin_stats& bin) {
  json.print(
      ", \"picks\": %zu, \"picks_with_choice\": %zu, \"runs_created\": %zu"
      ", \"runs_destroyed\": %zu, \"nonfull_at_pick\": [",
      bin.picks, bin.picks_with_choice, bin.runs_created, bin.runs_destroyed);
  for (int i = 0; i < RUNSEL_PICK_BUCKETS; ++i)
    json.print("%s%zu", i ? ", " : "", bin.nonfull_at_pick[i]);
  json.print("], \"picked_fullness\": [");
  for (int i = 0; i < RUNSEL_FULLNESS_BUCKETS; ++i)
    json.print("%s%zu", i ? ", " : "", bin.picked_fullness[i]);
  json.print("]");
}

// The fewest free regions a bin's live regions could leave, in bytes: packed into
// ceil(live / regions_per_run) runs. A policy that never moves an object cannot go
// below it, whichever runs it picks; a kept empty run is not in it (a policy may have
// none), so it counts in bin_unused above the bound. The bins are summed over arenas,
// and ceil(a + b) <= ceil(a) + ceil(b): a bound from the sums stays a lower bound
// (the replay runs on one thread, so one arena, and the two are equal).
std::size_t headroom_bound(const runsel_bin_stats& bin) {
  if (bin.regions_per_run == 0) return 0;
  std::size_t packed_runs = (bin.regions_in_use + bin.regions_per_run - 1) / bin.regions_per_run;
  return (packed_runs * bin.regions_per_run - bin.regions_in_use) * bin.size;
}

// One checkpoint: a text block on stdout and an element of the JSON list.
void report(Kind kind, const char* name, std::size_t name_length, const Replay& replay,
            const LiveBytes& live, const HeapResident& resident) {
  Purged purged = purged_copy(resident);  // first: the child must not see this report's output
  runsel_stats_t& s = stats;
  runsel_stats(&s);
  std::size_t heap_resident = resident.now();
  std::uint64_t ops = replay.tally().ops;
  if (kind == Kind::mark) std::printf("mark %.*s\n", static_cast<int>(name_length), name);
  std::printf("%s ops=%" PRIu64
              " live=%zu mapped=%zu committed=%zu allocated=%zu waste=%zu dirty=%zu "
              "bookkeeping=%zu bin_unused=%zu\n",
              kind == Kind::end    ? "end"
              : kind == Kind::peak ? "peak"
                                   : "stats",
              ops, live.live, s.mapped, s.committed, s.allocated, s.waste, s.dirty, s.bookkeeping,
              s.bin_unused);
  std::printf("resident ops=%" PRIu64 " bytes=%zu own=%zu\n", ops, heap_resident, resident.own());
  if (purged.measured)
    std::printf("purged ops=%" PRIu64 " resident=%zu committed=%zu\n", ops, purged.resident,
                purged.committed);
  std::fflush(stdout);

  static bool first = true;
  json.print("%s\n  {\"name\": ", first ? "" : ",");
  first = false;
  json.string(name, name_length);
  json.print(", \"kind\": \"%s\", \"ops\": %" PRIu64 ", \"live_requested\": %zu", kind_name(kind),
             ops, live.live);
  json.print(
      ", \"mapped\": %zu, \"committed\": %zu, \"allocated\": %zu, \"waste\": %zu"
      ", \"dirty\": %zu, \"bookkeeping\": %zu, \"bin_unused\": %zu, \"resident\": %zu",
      s.mapped, s.committed, s.allocated, s.waste, s.dirty, s.bookkeeping, s.bin_unused,
      heap_resident);
  if (purged.measured)
    json.print(", \"purged_resident\": %zu, \"purged_committed\": %zu", purged.resident,
               purged.committed);
  else
    json.print(", \"purged_resident\": null, \"purged_committed\": null");
  std::size_t bound = 0, kept_empty = 0;
  for (size_t i = 0; i < s.bin_count; ++i) {
    bound += headroom_bound(s.bins[i]);
    kept_empty += s.bins[i].empty_runs * s.bins[i].regions_per_run * s.bins[i].size;
  }
  json.print(", \"headroom_bound\": %zu, \"kept_empty_unused\": %zu, \"arenas\": %zu", bound,
             kept_empty, s.narenas);
  json.print(",\n   \"bins\": [");
  for (size_t i = 0; i < s.bin_count; ++i) {
    const runsel_bin_stats& bin = s.bins[i];
    json.print(
        "%s{\"size\": %zu, \"runs\": %zu, \"nonfull_runs\": %zu, \"regions_in_use\": %zu"
        ", \"unused_bytes\": %zu, \"bytes_per_run\": %zu, \"regions_per_run\": %zu"
        ", \"headroom_bound\": %zu",
        i ? ", " : "", bin.size, bin.runs, bin.nonfull_runs, bin.regions_in_use, bin.unused_bytes,
        bin.bytes_per_run, bin.regions_per_run, headroom_bound(bin));
    if (s.counting) print_pick_counters(bin);
    json.print("}");
  }
  json.print("]}");
}

void print_bin_table(const runsel_stats_t& s) {
  std::printf("bins:\n%8s %8s %9s %12s %10s %12s %12s\n", "size", "runs", "non-full", "regions/run",
              "in use", "utilization", "unused");
  for (const runsel_bin_stats& bin : s.bins) {
    if (bin.runs == 0) continue;
    double capacity = static_cast<double>(bin.runs * bin.regions_per_run);
    std::printf("%8zu %8zu %9zu %12zu %10zu %11.1f%% %12zu\n", bin.size, bin.runs, bin.nonfull_runs,
                bin.regions_per_run, bin.regions_in_use,
                capacity > 0 ? 100.0 * static_cast<double>(bin.regions_in_use) / capacity : 0.0,
                bin.unused_bytes);
  }
}

// --- the command ----------------------------------------------------------------------

struct Options {
  const char* path = nullptr;
  const char* json = nullptr;  // --json FILE ("-": stdout, the text then goes to stderr)
  std::uint64_t every = 0;
  std::uint64_t records = UINT64_MAX;  // --records N: replay only the first N
  std::uint64_t windows = 0;           // --windows K: callgrind counts K evenly spread windows
  std::uint64_t window_records = 0;    // --window-records W: records per window
  bool partial = false;                // accept a trace cut short (its process crashed)
  bool allow_large_live_set = false;   // replay even when the live blocks exceed memory
};

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--every N] [--records N] [--windows K --window-records W]\n"
               "       [--partial] [--allow-large-live-set]\n"
               "       [--json FILE] TRACE\n"
               "Replays TRACE against runsel (%s) on one thread, writing every block as\n"
               "the program did, and prints exact figures at each mark, every N records,\n"
               "at the peak of live bytes and at the end.\n"
               "--partial accepts a trace without its end record (its process was killed)\n"
               "and replays its complete records. --json also writes the figures as JSON.\n"
               "--records N replays only the first N records (cost counts).\n"
               "--windows K --window-records W: under callgrind (--instr-atstart=no\n"
               "--collect-atstart=no), instrument and count only K windows of W records\n"
               "spread evenly over the trace (one window over everything when K*W covers it).\n"
               "A trace whose replay would hold more than the memory it may use\n"
               "(MemAvailable, or less under ulimit -v or -d) is refused: its live blocks,\n"
               "32 bytes a block, its slot tables, the trace and 16 MiB of its own.\n"
               "--allow-large-live-set replays it anyway when its slot tables fit.\n",
               program, runsel_variant());
  return 2;
}

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--every") == 0 && i + 1 < argc) {
      char* end = nullptr;
      options.every = std::strtoull(argv[++i], &end, 10);
      if (*end != 0) return false;
    } else if (std::strcmp(argv[i], "--records") == 0 && i + 1 < argc) {
      char* end = nullptr;
      options.records = std::strtoull(argv[++i], &end, 10);
      if (*end != 0) return false;
    } else if ((std::strcmp(argv[i], "--windows") == 0 ||
                std::strcmp(argv[i], "--window-records") == 0) &&
               i + 1 < argc) {
      std::uint64_t& target =
          argv[i][9] == 0 ? options.windows : options.window_records;  // "--windows" is 9 long
      char* end = nullptr;
      target = std::strtoull(argv[++i], &end, 10);
      if (*end != 0 || target == 0) return false;
    } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      options.json = argv[++i];
    } else if (std::strcmp(argv[i], "--partial") == 0) {
      options.partial = true;
    } else if (std::strcmp(argv[i], "--allow-large-live-set") == 0) {
      options.allow_large_live_set = true;
    } else if (argv[i][0] == '-' || options.path != nullptr) {
      return false;
    } else {
      options.path = argv[i];
    }
  }
  return options.path != nullptr && (options.windows == 0) == (options.window_records == 0);
}

// The whole file, mapped read-only (no allocation). size 0 gives nullptr; MAP_FAILED
// with `opened` false: the file cannot be opened, true: it cannot be mapped (errno).
const std::uint8_t* map_file(const char* path, std::size_t& size, bool& opened) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat info;
  opened = false;
  if (fd < 0 || fstat(fd, &info) != 0) {
    if (fd >= 0) close(fd);
    return reinterpret_cast<const std::uint8_t*>(MAP_FAILED);
  }
  opened = true;
  size = static_cast<std::size_t>(info.st_size);
  void* data = size == 0 ? nullptr : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int error = errno;
  close(fd);
  errno = error;
  return static_cast<const std::uint8_t*>(data);
}

// What the replay sets in RUNSEL_CONF unless it is set there already: freed huge
// mappings leave runsel's cache by size only, never by age, whose clock would make
// two replays of one trace differ (and a replay runs faster than its program).
const char kNoAgeing[] = "huge_cache_ms:10000000000";

// Chunk addresses decide which run "lowest address first" picks, and mmap's
// placement (so how chunks align and order) moves with address randomization:
// replay without it, so one trace gives the same figures on every run. Re-executes
// the replayer once, with kNoAgeing added to RUNSEL_CONF (runsel reads it when it
// starts, before main); where personality() is refused it carries on randomized.
// Under valgrind /proc/self/exe is valgrind's: the caller sets both (cost.py does).
// Transparent huge pages are off too: khugepaged could otherwise change resident
// memory between two runs.
void deterministic_process(char** argv) {
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  if (RUNNING_ON_VALGRIND) return;
  int current = personality(0xffffffff);
  const char* conf = getenv("RUNSEL_CONF");
  bool ageing_set = conf != nullptr && std::strstr(conf, "huge_cache_ms:") != nullptr;
  bool randomized = current != -1 && !(current & ADDR_NO_RANDOMIZE);
  if (!randomized && ageing_set) return;
  if (randomized && personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE) == -1)
    randomized = false;
  static char setting[4096];
  static char* environment[8192];
  std::size_t n = 0;
  for (char** entry = environ;
       *entry != nullptr && n + 2 < sizeof environment / sizeof *environment; ++entry)
    if (ageing_set || std::strncmp(*entry, "RUNSEL_CONF=", 12) != 0) environment[n++] = *entry;
  if (!ageing_set) {
    int length = std::snprintf(setting, sizeof setting, "RUNSEL_CONF=%s%s%s", conf ? conf : "",
                               conf && *conf ? "," : "", kNoAgeing);
    if (length <= 0 || static_cast<std::size_t>(length) >= sizeof setting) return;
    environment[n++] = setting;
  }
  environment[n] = nullptr;
  execve("/proc/self/exe", argv, environment);
}

int reject(const char* path, const Problem& problem) {
  std::fprintf(stderr, "runsel-replay: %s: malformed trace at byte offset %zu: %s\n", path,
               problem.offset, problem.what);
  return 2;
}

// Makes later stack use and the output and stats buffers resident now, before the
// baseline (stdout flushed first), so none of them counts as heap.
void touch_stack_and_buffers(char* output_buffer, std::size_t size) {
  volatile char stack[256 * 1024];
  for (std::size_t i = 0; i < sizeof stack; i += 4096) stack[i] = 0;
  std::memset(output_buffer, 0, size);
  std::memset(static_cast<void*>(&stats), 0, sizeof stats);
  json.touch();
}

const char* file_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The survey stopped before the end: more live blocks than slot tables can be had
// for, or its own table could not grow. Always refused (exit 2, one line).
int refuse_survey(const Options& options, const TraceSurvey& survey, std::size_t trace_bytes,
                  const MemoryBound& bound) {
  if (survey.beyond_block_limit) {
    ReplayHolding holding = replay_holding(trace_bytes, survey.peak_live_blocks, 0);
    std::fprintf(stderr,
                 "runsel-replay: %s: the trace's live blocks reach %zu at once at record %" PRIu64
                 ", and their slot tables alone would make the replay hold %" PRIu64
                 " bytes (%" PRIu64
                 " of slot tables, the trace and the replayer), more than "
                 "the %" PRIu64 " bytes of %s: refused\n",
                 options.path, survey.peak_live_blocks, survey.records, holding.tables(),
                 holding.slot_tables, bound.bytes, bound.what);
  } else {
    std::fprintf(stderr,
                 "runsel-replay: %s: cannot map %zu bytes for the survey's table of live "
                 "blocks at record %" PRIu64 ": %s: refused\n",
                 options.path, survey.table_failed_bytes, survey.records,
                 std::strerror(survey.table_failed_errno));
  }
  return 2;
}

// Every live block is written: a live set beyond memory would swap or meet the
// OOM killer (a log can claim any size), so it is refused before any call, and so
// is one whose slot tables would not fit (the survey stops at those).
bool live_set_fits_in_memory(const Options& options, const TraceSurvey& survey,
                             const ReplayHolding& holding, const MemoryBound& bound) {
  if (options.allow_large_live_set || holding.total() <= bound.bytes) return true;
  std::uint64_t own = holding.own();
  std::fprintf(stderr,
               "runsel-replay: %s: the trace's live blocks peak at %" PRIu64
               " bytes (record %" PRIu64 "), more than the %" PRIu64 " bytes left of the %" PRIu64
               " bytes of %s beside the replay's own %" PRIu64
               " (slot tables for up to %zu live blocks, %" PRIu64
               " bytes a block, the trace and the replayer), and a replay writes every live "
               "block: refused (--allow-large-live-set replays it anyway)\n",
               options.path, survey.peak_live_bytes, survey.peak_ops,
               bound.bytes > own ? bound.bytes - own : 0, bound.bytes, bound.what, own,
               survey.peak_live_blocks, kBytesPerBlock);
  return false;
}

// A slot table of the replay could not be mapped: refused (exit 2, one line).
int refuse_tables(const Options& options, const Replay& replay) {
  const AddressTable& failed = replay.slots().failed() ? replay.slots() : replay.blocks().sizes();
  std::fprintf(stderr, "runsel-replay: %s: cannot map %zu bytes for a slot table: %s: refused\n",
               options.path, failed.failed_bytes(), std::strerror(failed.failed_errno()));
  return 2;
}

// Opens the --json file, if one was asked for; false (said on stderr) if it cannot.
bool open_json_output(const Options& options) {
  if (options.json != nullptr) {
    int fd = open(options.json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::fprintf(stderr, "runsel-replay: %s: %s\n", options.json, std::strerror(errno));
      return false;
    }
    json.open(fd);
  }
  return true;
}

// What the replay holds at most and the bound it was held to, as one line on stderr
// (the bound moves with the machine's load, and two replays of a trace print the same
// bytes on stdout and in the JSON): once nothing can refuse the replay any more.
void announce_memory(const Options& options, const TraceSurvey& survey,
                     const ReplayHolding& holding, const MemoryBound& bound) {
  bool within = holding.total() <= bound.bytes;
  std::fprintf(stderr,
               "runsel-replay: %s: memory: a replay holds at most %" PRIu64
               " bytes (slot tables %" PRIu64 " for up to %zu live blocks, live blocks %" PRIu64
               " and %" PRIu64 " bytes a block, the trace %" PRIu64 ", the replayer %" PRIu64
               "), %s the %" PRIu64 " bytes of %s%s\n",
               options.path, holding.total(), holding.slot_tables, survey.peak_live_blocks,
               holding.live, kBytesPerBlock, holding.trace, holding.replayer,
               within ? "within" : "more than", bound.bytes, bound.what,
               within ? ""
                      : "; --allow-large-live-set: an allocation that cannot be had is "
                        "counted as failed");
}

// The text header and the JSON up to its checkpoints: the trace, the variant, the
// purge policy and how blocks are written and resident bytes measured.
void print_preamble(const Options& options, const TraceSurvey& survey) {
  const Header& header = survey.header;
  std::printf("# runsel-replay %s: %s (pid %" PRIu64 "%s), %" PRIu64 " records, %" PRIu64
              " marks%s\n",
              runsel_variant(), options.path, header.pid,
              (header.flags & kFlagForkedChild) ? ", forked child" : "", survey.records,
              survey.marks, survey.complete ? "" : ", partial: no end record");
  std::printf(
      "# blocks written as the program did: every requested byte at allocation, "
      "realloc keeps the bytes it copied; resident: the heap's anonymous resident "
      "bytes\n");
  json.print("{\"tool\": \"runsel-replay\", \"variant\": \"%s\",\n \"trace\": {\"file\": ",
             runsel_variant());
  json.string(file_name(options.path), std::strlen(file_name(options.path)));
  json.print(", \"pid\": %" PRIu64 ", \"forked_child\": %s, \"records\": %" PRIu64
             ", \"marks\": %" PRIu64 ", \"complete\": %s, \"peak_live_requested\": %" PRIu64 "},\n",
             header.pid, (header.flags & kFlagForkedChild) ? "true" : "false", survey.records,
             survey.marks, survey.complete ? "true" : "false", survey.peak_live_bytes);
  const char* conf = getenv("RUNSEL_CONF");
  json.print(" \"purge_policy\": \"%s\", \"profile\": \"%s\", \"runsel_conf\": ",
             runsel_purge_policy(), runsel_profile());
  json.string(conf ? conf : "", conf ? std::strlen(conf) : 0);
  json.print(",\n");
  std::printf("# purge policy %s, profile %s, RUNSEL_CONF=%s\n", runsel_purge_policy(),
              runsel_profile(), conf ? conf : "");
  if (std::strcmp(runsel_purge_policy(), "decay") == 0)
    std::printf("# the decay policy purges by the clock: figures may differ between replays\n");
  json.print(
      " \"writes_blocks\": true,\n \"resident_how\": \"anonymous resident bytes of the "
      "replay process (smaps_rollup, a page-table walk) less its slot tables and what "
      "was resident before the first call; every block written in full when allocated\",\n"
      " \"checkpoints\": [");
}

}  // namespace

// Evenly spread counting windows: window i covers records [start(i), start(i) + W).
// Outside them callgrind runs uninstrumented (several times faster), so a sample of
// the whole trace costs little; inside, it simulates the caches from the state
// instrumentation starts with (a cold start per window, a few thousand misses).
class Windows {
 public:
  Windows(std::uint64_t count, std::uint64_t length, std::uint64_t records)
      : count_(count), length_(length), records_(records) {
    if (count_ != 0 && count_ * length_ >= records_) {  // the whole trace: one window
      count_ = 1;
      length_ = records_;
    }
  }
  bool active() const { return count_ != 0; }
  std::uint64_t covered() const { return count_ * length_; }
  std::uint64_t count() const { return count_; }
  // Called before each record with the number of records replayed so far.
  void at(std::uint64_t ops) {
    if (!active()) return;
    if (open_ && ops == end_) {
      CALLGRIND_TOGGLE_COLLECT;
      CALLGRIND_STOP_INSTRUMENTATION;
      open_ = false;
      ++done_;
    }
    if (!open_ && done_ < count_ && ops == start(done_)) {
      CALLGRIND_START_INSTRUMENTATION;
      CALLGRIND_TOGGLE_COLLECT;
      open_ = true;
      end_ = ops + length_;
    }
  }
  void finish() {
    if (open_) {
      CALLGRIND_TOGGLE_COLLECT;
      CALLGRIND_STOP_INSTRUMENTATION;
      open_ = false;
    }
  }

 private:
  std::uint64_t start(std::uint64_t i) const {
    return count_ == 1 ? 0 : i * (records_ - length_) / (count_ - 1);
  }
  std::uint64_t count_, length_, records_;
  std::uint64_t done_ = 0, end_ = 0;
  bool open_ = false;
};

// The replay proper, out of line and named so that a profiler can count it alone
// (callgrind --toggle-collect=runsel_replay_measured*): every record in order,
// with a checkpoint at each mark, at the peak, and every N records.
[[gnu::noinline]] void runsel_replay_measured(Reader& reader, Replay& replay, LiveBytes& live,
                                              const HeapResident& resident,
                                              const TraceSurvey& survey, const Options& options,
                                              Windows& windows) {
  char name[32];
  for (Record record; replay.tally().ops < options.records && reader.next(record);) {
    windows.at(replay.tally().ops);
    replay.step(record);
    std::uint64_t ops = replay.tally().ops;
    if (record.op == Op::mark)
      report(Kind::mark, record.label, record.label_length, replay, live, resident);
    if (ops == survey.peak_ops) report(Kind::peak, "peak", 4, replay, live, resident);
    if (options.every != 0 && ops % options.every == 0) {
      int n = std::snprintf(name, sizeof name, "ops_%" PRIu64, ops);
      report(Kind::every, name, static_cast<std::size_t>(n), replay, live, resident);
    }
  }
}

namespace {

// After the end checkpoint: the windows counted, the replay's tally, the bins, and
// the JSON's last lines.
void print_totals(const Windows& windows, const TraceSurvey& survey, const Replay& replay,
                  const LiveBytes& live) {
  if (windows.active())
    std::printf(
        "windows count=%" PRIu64 " records=%" PRIu64 " covered=%" PRIu64 " of=%" PRIu64 "\n",
        windows.count(), windows.covered() / windows.count(), windows.covered(), survey.records);

  const ReplayTally& tally = replay.tally();
  std::printf("replay ops=%" PRIu64 " unknown_pointers=%" PRIu64 " failed=%" PRIu64
              " reused_live=%" PRIu64 " live=%zu checksum=%" PRIu64 "\n",
              tally.ops, tally.unknown_pointers, tally.failed, tally.reused_live, replay.live(),
              live.checksum);
  runsel_stats(&stats);
  print_bin_table(stats);
  std::fflush(stdout);
  json.print("\n ],\n \"counting\": %s,\n \"replay\": {\"ops\": %" PRIu64
             ", \"unknown_pointers\": %" PRIu64 ", \"failed\": %" PRIu64
             ", \"reused_live\": %" PRIu64 ", \"live_blocks\": %zu, \"checksum\": %" PRIu64 "}}\n",
             stats.counting ? "true" : "false", tally.ops, tally.unknown_pointers, tally.failed,
             tally.reused_live, replay.live(), live.checksum);
}

}  // namespace

int main(int argc, char** argv) {
  static char output_buffer[1 << 16];  // stdio would otherwise malloc its buffer
  std::setvbuf(stdout, output_buffer, _IOFBF, sizeof output_buffer);
  deterministic_process(argv);
  Options options;
  if (!parse(argc, argv, options)) return usage(argv[0]);
  // Read before the trace is mapped: under a limit on the address space, the room
  // left then is what the trace, the tables and the blocks share.
  MemoryBound bound = replay_memory_bound();
  std::size_t size = 0;
  bool opened = false;
  const std::uint8_t* data = map_file(options.path, size, opened);
  if (data == MAP_FAILED) {
    std::fprintf(stderr, "runsel-replay: %s: %s%s%s\n", options.path,
                 opened ? "cannot map the trace: " : "", std::strerror(errno),
                 opened ? ": refused" : "");
    return opened ? 2 : 1;
  }

  // Validate the whole trace first, so a bad one replays nothing; stop at once at
  // more live blocks than slot tables can be had for.
  TraceSurvey survey;
  if (!survey_trace(data, size, options.partial, survey, blocks_within(size, bound.bytes))) {
    if (survey.problem.what != nullptr) return reject(options.path, survey.problem);
    return refuse_survey(options, survey, size, bound);
  }
  ReplayHolding holding = replay_holding(size, survey.peak_live_blocks, survey.peak_live_bytes);
  if (!live_set_fits_in_memory(options, survey, holding, bound)) return 2;

  LiveBytes live;
  // Slot tables sized for the trace's peak and touched now, so they never grow.
  Replay replay(survey.peak_live_blocks, true, live, survey.peak_live_blocks);
  if (replay.slots().failed() || replay.blocks().sizes().failed())
    return refuse_tables(options, replay);
  if (!open_json_output(options)) return 1;
  announce_memory(options, survey, holding, bound);

  print_preamble(options, survey);
  HeapResident resident(replay);
  std::fflush(stdout);
  touch_stack_and_buffers(output_buffer, sizeof output_buffer);
  resident.take_baseline();

  Reader reader(data, size, options.partial);
  Header again;
  reader.read_header(again);
  Windows windows(options.windows, options.window_records, survey.records);
  runsel_replay_measured(reader, replay, live, resident, survey, options, windows);
  windows.finish();
  report(Kind::end, "end", 3, replay, live, resident);
  print_totals(windows, survey, replay, live);
  json.flush();
  return 0;
}
