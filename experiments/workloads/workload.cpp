// The Recorder and the Heap of workload.h. Checkpoint records live in a scratch
// area mapped and touched before the first checkpoint, so recording never calls
// malloc inside the measured region and never changes resident memory after "start".
#include "workload.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "../allocator_identity.h"

namespace workload {

// --- options -------------------------------------------------------------------------

Options parse_options(int argc, char** argv, const char* workload_name) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--seed" && has_value) {
      options.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--scale" && has_value) {
      options.scale = std::strtod(argv[++i], nullptr);
    } else if (arg == "--out" && has_value) {
      options.out = argv[++i];
    } else if (arg == "--no-introspection") {
      options.introspect = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seed N] [--scale X] [--no-introspection] [--out PATH]\n"
                   "Runs the %s workload and prints one JSON document.\n",
                   argv[0], workload_name);
      std::exit(arg == "--help" || arg == "-h" ? 0 : 2);
    }
  }
  if (!(options.scale > 0)) {
    std::fprintf(stderr, "%s: --scale must be positive\n", workload_name);
    std::exit(2);
  }
  return options;
}

size_t scaled(const Options& options, size_t count, size_t minimum) {
  auto value = size_t(double(count) * options.scale + 0.5);
  return value < minimum ? minimum : value;
}

size_t Rng::log_uniform(size_t low, size_t high) {
  // A power-of-two band chosen uniformly, then a size uniform inside it.
  int low_bit = 63 - __builtin_clzll(low), high_bit = 63 - __builtin_clzll(high);
  int bit = low_bit + int(below(size_t(high_bit - low_bit + 1)));
  size_t band_low = size_t(1) << bit, band_high = (band_low << 1) - 1;
  if (band_low < low) band_low = low;
  if (band_high > high) band_high = high;
  return between(band_low, band_high);
}

// --- heap ----------------------------------------------------------------------------

namespace {
[[noreturn]] void out_of_memory(size_t size) {
  std::fprintf(stderr, "workload: allocation of %zu bytes failed\n", size);
  std::abort();
}
unsigned char fill_byte(size_t size) { return static_cast<unsigned char>((size * 131) | 1); }
}  // namespace

void* Heap::allocate(size_t size) {
  void* block = std::malloc(size);
  if (block == nullptr) out_of_memory(size);
  std::memset(block, fill_byte(size), size);
  live_.fetch_add(size, std::memory_order_relaxed);
  return block;
}

void* Heap::allocate_zeroed(size_t count, size_t size) {
  void* block = std::calloc(count, size);
  if (block == nullptr) out_of_memory(count * size);
  static_cast<unsigned char*>(block)[0] = fill_byte(size);
  live_.fetch_add(count * size, std::memory_order_relaxed);
  return block;
}

void* Heap::resize(void* block, size_t old_size, size_t new_size) {
  void* moved = std::realloc(block, new_size);
  if (moved == nullptr) out_of_memory(new_size);
  if (new_size > old_size)
    std::memset(static_cast<unsigned char*>(moved) + old_size, fill_byte(new_size),
                new_size - old_size);
  live_.fetch_add(new_size - old_size, std::memory_order_relaxed);  // wraps when shrinking
  return moved;
}

void Heap::release(void* block, size_t size) {
  if (block == nullptr) return;
  checksum_.fetch_add(*static_cast<unsigned char*>(block) + size, std::memory_order_relaxed);
  std::free(block);
  live_.fetch_sub(size, std::memory_order_relaxed);
}

void Heap::release_storage(void* block, size_t size) {
  if (block == nullptr) return;
  checksum_.fetch_add(size, std::memory_order_relaxed);
  std::free(block);
  live_.fetch_sub(size, std::memory_order_relaxed);
}

extern "C" __attribute__((noinline)) void workload_measured_region(void (*work)(void*),
                                                                   void* context) {
  work(context);
  asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline)) void workload_measured_worker(void (*work)(void*),
                                                                   void* context) {
  work(context);
  asm volatile("" ::: "memory");
}

// --- recorder ------------------------------------------------------------------------

namespace {

constexpr size_t kMaxCheckpoints = 96;
constexpr size_t kMaxChunkMaps = 6144;  // 1.6 MB of maps: 6 GiB of chunks in all

using StatsFunction = void (*)(runsel_stats_t*);
using ChunkMapsFunction = size_t (*)(runsel_chunk_map*, size_t);

struct CheckpointRecord {
  char name[40];
  double seconds;  // measured time so far
  size_t resident;
  size_t live_requested;
  long minor_faults;
  bool has_stats;
  runsel_stats_t stats;
  size_t map_first, map_count, chunks_total;
};

struct Scratch {
  CheckpointRecord checkpoints[kMaxCheckpoints];
  runsel_chunk_map maps[kMaxChunkMaps];
};

double clock_seconds(clockid_t clock) {
  timespec time{};
  clock_gettime(clock, &time);
  return double(time.tv_sec) + double(time.tv_nsec) * 1e-9;
}
double now_seconds() { return clock_seconds(CLOCK_MONOTONIC); }
// CPU time of every thread of the process: what other processes on a busy
// machine do not add to (they still share its caches).
double cpu_seconds() { return clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }

// Resident set of the whole process from /proc/self/statm; no allocation.
size_t resident_bytes() {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  char* rest = nullptr;
  std::strtoull(text, &rest, 10);
  return size_t(std::strtoull(rest, nullptr, 10)) * size_t(sysconf(_SC_PAGESIZE));
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A counting build's pick counters, as members of the bin's object.
void write_pick_counts(FILE* out, const runsel_bin_stats& bin) {
  std::fprintf(out,
               ", \"picks\": %zu, \"picks_with_choice\": %zu, \"runs_created\": %zu, "
               "\"runs_destroyed\": %zu, \"nonfull_at_pick\": [",
               bin.picks, bin.picks_with_choice, bin.runs_created, bin.runs_destroyed);
  for (size_t i = 0; i < RUNSEL_PICK_BUCKETS; ++i)
    std::fprintf(out, "%s%zu", i ? ", " : "", bin.nonfull_at_pick[i]);
  std::fputs("], \"picked_fullness\": [", out);
  for (size_t i = 0; i < RUNSEL_FULLNESS_BUCKETS; ++i)
    std::fprintf(out, "%s%zu", i ? ", " : "", bin.picked_fullness[i]);
  std::fputs("]", out);
}

void write_stats(FILE* out, const runsel_stats_t& stats) {
  const struct {
    const char* name;
    size_t value;
  } figures[] = {
      {"mapped", stats.mapped},
      {"committed", stats.committed},
      {"allocated", stats.allocated},
      {"waste", stats.waste},
      {"dirty", stats.dirty},
      {"bookkeeping", stats.bookkeeping},
      {"bin_unused", stats.bin_unused},
      {"small_allocated", stats.small_allocated},
      {"large_allocated", stats.large_allocated},
      {"huge_allocated", stats.huge_allocated},
      {"narenas", stats.narenas},
      {"chunks", stats.chunks},
      {"idle_chunks", stats.idle_chunks},
      {"huge_count", stats.huge_count},
      {"dirty_max", stats.dirty_max},
      {"nmalloc", stats.nmalloc},
      {"nfree", stats.nfree},
      {"purges", stats.purges},
      {"counting", stats.counting},
  };
  std::fputs("{", out);
  for (const auto& figure : figures) std::fprintf(out, "\"%s\": %zu, ", figure.name, figure.value);
  std::fputs("\"bins\": [", out);
  for (size_t i = 0; i < stats.bin_count; ++i) {
    const runsel_bin_stats& bin = stats.bins[i];
    std::fprintf(out,
                 "%s{\"size\": %zu, \"runs\": %zu, \"nonfull_runs\": %zu, "
                 "\"regions_per_run\": %zu, \"bytes_per_run\": %zu, \"unused_bytes\": %zu, "
                 "\"regions_in_use\": %zu",
                 i ? ", " : "", bin.size, bin.runs, bin.nonfull_runs, bin.regions_per_run,
                 bin.bytes_per_run, bin.unused_bytes, bin.regions_in_use);
    if (stats.counting) write_pick_counts(out, bin);
    std::fputs("}", out);
  }
  std::fputs("]}", out);
}

void write_chunk_maps(FILE* out, const CheckpointRecord& record, const runsel_chunk_map* maps) {
  std::fprintf(out, "{\"total\": %zu, \"chunks\": [", record.chunks_total);
  for (size_t i = 0; i < record.map_count; ++i) {
    const runsel_chunk_map& map = maps[record.map_first + i];
    std::fprintf(out, "%s{\"arena\": %u, \"address\": %zu, \"pages\": \"", i ? ", " : "", map.arena,
                 map.address);
    for (unsigned char page : map.pages) std::fprintf(out, "%02x", page);
    std::fputs("\"}", out);
  }
  std::fputs("]}", out);
}

}  // namespace

struct Recorder::Impl {
  const char* workload_name;
  Options options;
  experiments::AllocatorIdentity identity;
  StatsFunction stats_function = nullptr;
  ChunkMapsFunction chunk_maps_function = nullptr;
  Scratch* scratch = nullptr;
  size_t checkpoint_count = 0, maps_used = 0;
  double measured = 0, region_started = 0, wall_started = 0;
  double cpu_measured = 0, cpu_region_started = 0;  // the process's CPU time, all threads
  long faults_at_begin = 0;
  bool overflowed = false;

  void record(const char* name, const Heap& heap, bool want_maps) {
    if (checkpoint_count == kMaxCheckpoints) {
      overflowed = true;
      return;
    }
    CheckpointRecord& record = scratch->checkpoints[checkpoint_count++];
    std::snprintf(record.name, sizeof record.name, "%s", name);
    record.seconds = measured;
    record.resident = resident_bytes();
    record.live_requested = heap.live_bytes();
    record.minor_faults = minor_faults() - faults_at_begin;
    record.has_stats = stats_function != nullptr;
    if (record.has_stats) stats_function(&record.stats);
    record.map_first = maps_used;
    record.map_count = record.chunks_total = 0;
    if (want_maps && chunk_maps_function != nullptr) {
      record.chunks_total =
          chunk_maps_function(scratch->maps + maps_used, kMaxChunkMaps - maps_used);
      record.map_count = std::min(record.chunks_total, kMaxChunkMaps - maps_used);
      maps_used += record.map_count;
    }
  }
};

Recorder::Recorder(const char* workload_name, const Options& options) : impl_(new Impl) {
  impl_->workload_name = workload_name;
  impl_->options = options;
  if (options.introspect) {
    impl_->stats_function = reinterpret_cast<StatsFunction>(dlsym(RTLD_DEFAULT, "runsel_stats"));
    impl_->chunk_maps_function =
        reinterpret_cast<ChunkMapsFunction>(dlsym(RTLD_DEFAULT, "runsel_chunk_maps"));
  }
  void* area =
      mmap(nullptr, sizeof(Scratch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) {
    std::perror("workload: mmap of the checkpoint scratch area");
    std::exit(1);
  }
  // Touched now, so the scratch area is resident from "start" on and never changes
  // resident memory between checkpoints.
  std::memset(area, 0, sizeof(Scratch));
  impl_->scratch = static_cast<Scratch*>(area);
}

void Recorder::begin(const Heap& heap) {
  impl_->faults_at_begin = minor_faults();
  impl_->record("start", heap, false);
  impl_->cpu_region_started = cpu_seconds();
  impl_->wall_started = impl_->region_started = now_seconds();
}

void Recorder::checkpoint(const char* name, const Heap& heap, bool chunk_maps) {
  double stopped = now_seconds();
  impl_->cpu_measured += cpu_seconds() - impl_->cpu_region_started;
  impl_->measured += stopped - impl_->region_started;
  impl_->record(name, heap, chunk_maps);
  impl_->cpu_region_started = cpu_seconds();
  impl_->region_started = now_seconds();
}

int Recorder::finish(const Heap& heap, const char* notes, bool deterministic, const char* extra) {
  double stopped = now_seconds();
  impl_->cpu_measured += cpu_seconds() - impl_->cpu_region_started;
  impl_->measured += stopped - impl_->region_started;
  impl_->record("end", heap, false);
  // Only now: naming the allocator builds std::strings, whose heap allocations (a
  // longer variant name passes the small-string limit) must not differ between
  // variants inside the measured region.
  impl_->identity = experiments::detect_allocator();
  const Impl& run = *impl_;

  FILE* out = run.options.out ? std::fopen(run.options.out, "w") : stdout;
  if (out == nullptr) {
    std::perror(run.options.out);
    return 1;
  }
  std::fprintf(out, "{\"workload\": \"%s\", \"seed\": %llu, \"scale\": %g, \"introspect\": %s,\n",
               run.workload_name, static_cast<unsigned long long>(run.options.seed),
               run.options.scale, run.options.introspect ? "true" : "false");
  std::fprintf(
      out, " \"allocator\": {\"name\": \"%s\", \"provider\": \"%s\", \"purge\": \"%s\"},\n",
      run.identity.name.c_str(), run.identity.provider.c_str(), run.identity.purge.c_str());
  std::fprintf(out,
               " \"measured_seconds\": %.9f, \"measured_cpu_seconds\": %.9f, "
               "\"wall_seconds\": %.9f, \"checksum\": %llu,\n",
               run.measured, run.cpu_measured, stopped - run.wall_started,
               static_cast<unsigned long long>(heap.checksum()));
  std::fprintf(out, " \"notes\": \"%s\", \"deterministic\": %s, \"checkpoints_overflowed\": %s,\n",
               notes, deterministic ? "true" : "false", run.overflowed ? "true" : "false");
  if (extra != nullptr) std::fprintf(out, " %s,\n", extra);
  std::fputs(" \"checkpoints\": [\n", out);
  for (size_t i = 0; i < run.checkpoint_count; ++i) {
    const CheckpointRecord& record = run.scratch->checkpoints[i];
    std::fprintf(out,
                 "  %s{\"name\": \"%s\", \"seconds\": %.9f, \"resident\": %zu, "
                 "\"live_requested\": %zu, \"minor_faults\": %ld",
                 i ? "," : "", record.name, record.seconds, record.resident, record.live_requested,
                 record.minor_faults);
    if (record.has_stats) {
      std::fputs(",\n   \"runsel\": ", out);
      write_stats(out, record.stats);
    }
    if (record.chunks_total) {
      std::fputs(",\n   \"chunk_maps\": ", out);
      write_chunk_maps(out, record, run.scratch->maps);
    }
    std::fputs("}\n", out);
  }
  std::fputs(" ]}\n", out);
  bool ok = std::fflush(out) == 0;
  if (out != stdout) ok = std::fclose(out) == 0 && ok;
  return ok ? 0 : 1;
}

}  // namespace workload
