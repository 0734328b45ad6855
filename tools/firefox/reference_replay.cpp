// librunsel-firefox-replay.so: runsel's trace replayer (tools/trace/replay.cpp,
// unchanged) run inside firefox-esr on Firefox's own allocator, the mozjemalloc
// in its executable. Preloaded into `firefox-esr --version`, its constructor
// replays the trace before Firefox's main runs, through malloc/free (which
// resolve to the executable's exports), and exits with the replayer's code.
//
//   RUNSEL_FIREFOX_REPLAY="--json OUT [--partial] ... TRACE"
//   MALLOC_OPTIONS=r LD_PRELOAD=build/tools/firefox/librunsel-firefox-replay.so firefox-esr
//   --version
//
// The replayer reads figures through runsel's stats call; here that call is
// answered from the executable's jemalloc_stats_internal (stats_layout.h), so
// the reference row has the same columns as every container's.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runsel.h"
#include "stats_layout.h"

int runsel_replay_main(int argc, char** argv);  // replay.cpp's main, renamed

namespace {

jemalloc_stats_fn firefox_stats;
num_bins_fn firefox_bins;

[[noreturn]] void refuse(const char* what) {
  std::fprintf(stderr, "runsel-replay (firefox): %s\n", what);
  std::fflush(stderr);
  _exit(2);
}

void find_allocator() {
  firefox_stats =
      reinterpret_cast<jemalloc_stats_fn>(dlsym(RTLD_DEFAULT, "jemalloc_stats_internal"));
  firefox_bins = reinterpret_cast<num_bins_fn>(dlsym(RTLD_DEFAULT, "jemalloc_stats_num_bins"));
  if (firefox_stats == nullptr || firefox_bins == nullptr)
    refuse("this program exports no jemalloc_stats_internal: not firefox-esr's executable");
}

}  // namespace

extern "C" {

// runsel's stats call over mozjemalloc's figures. committed is summed from the
// parts as about:memory does; never-touched ("fresh") and madvised pages are not
// committed in runsel's sense either.
void runsel_stats(runsel_stats_t* out) {
  static moz_stats s;
  static moz_bin_stats bins[MAX_BINS];
  std::memset(&s, 0, sizeof s);
  std::memset(bins, 0, sizeof bins);
  std::size_t count = firefox_bins();
  if (count == 0 || count > MAX_BINS) refuse("jemalloc_stats_num_bins is out of range");
  firefox_stats(&s, bins);
  if (!stats_layout_matches(&s, count))
    refuse(
        "this Firefox's jemalloc_stats layout is not the known one (quantum 16, chunk 1 MiB, "
        "page 4 KiB)");
  std::memset(out, 0, sizeof *out);
  out->mapped = s.mapped;
  out->allocated = s.allocated;
  out->waste = s.waste;
  out->dirty = s.pages_dirty;
  out->bookkeeping = s.bookkeeping;
  out->bin_unused = s.bin_unused;
  out->committed = stats_committed(&s);
  out->narenas = s.narenas;
  out->dirty_max = s.dirty_max * s.page_size;
  out->nmalloc = s.num_operations;  // malloc + free calls: not split by mozjemalloc
  out->bin_count = count < RUNSEL_MAX_BINS ? count : RUNSEL_MAX_BINS;
  for (std::size_t i = 0; i < out->bin_count; ++i) {
    const moz_bin_stats& b = bins[i];
    runsel_bin_stats& bin = out->bins[i];
    bin.size = b.size;
    bin.runs = b.num_runs;
    bin.nonfull_runs = b.num_non_full_runs;
    bin.regions_per_run = b.regions_per_run;
    bin.bytes_per_run = b.bytes_per_run;
    bin.unused_bytes = b.bytes_unused;
    std::size_t capacity = b.num_runs * b.regions_per_run;
    std::size_t free_regions = b.size ? b.bytes_unused / b.size : 0;
    bin.regions_in_use = capacity > free_regions ? capacity - free_regions : 0;
  }
}

// The forced purge the replay measures in a forked copy at every checkpoint: mozjemalloc's
// own jemalloc_free_dirty_pages (looked up once; a Firefox without it purges nothing).
void runsel_free_dirty_pages(void) {
  using free_dirty_fn = void (*)();
  static const auto free_dirty =
      reinterpret_cast<free_dirty_fn>(dlsym(RTLD_DEFAULT, "jemalloc_free_dirty_pages"));
  if (free_dirty != nullptr) free_dirty();
}

const char* runsel_variant(void) { return "firefox"; }
const char* runsel_purge_policy(void) { return "firefox"; }
const char* runsel_profile(void) { return "firefox"; }

}  // extern "C"

// RUNSEL_FIREFOX_GEOMETRY=1: prints this Firefox's run layout, one line per size class
// ("size bytes_per_run regions_per_run", from its bin statistics), and exits.
static void print_geometry_and_exit() {
  find_allocator();
  static moz_stats s;
  static moz_bin_stats bins[MAX_BINS];
  std::size_t count = firefox_bins();
  if (count == 0 || count > MAX_BINS) refuse("jemalloc_stats_num_bins is out of range");
  void* warm = std::malloc(16);  // the allocator initialises on its first call
  std::free(warm);
  firefox_stats(&s, bins);
  if (!stats_layout_matches(&s, count))
    refuse(
        "this Firefox's jemalloc_stats layout is not the known one (quantum 16, chunk 1 MiB, "
        "page 4 KiB)");
  for (std::size_t i = 0; i < count; ++i)
    std::printf("%zu %zu %zu\n", bins[i].size, bins[i].bytes_per_run, bins[i].regions_per_run);
  std::fflush(stdout);
  _exit(0);
}

// With RUNSEL_FIREFOX_GEOMETRY set, prints the run layout and exits; else runs the
// replay named by RUNSEL_FIREFOX_REPLAY (arguments separated by spaces; paths with
// spaces are not supported) and exits; without either, does nothing.
__attribute__((constructor)) static void replay_inside_firefox() {
  const char* geometry = std::getenv("RUNSEL_FIREFOX_GEOMETRY");
  if (geometry != nullptr && geometry[0] != 0) print_geometry_and_exit();
  const char* arguments = std::getenv("RUNSEL_FIREFOX_REPLAY");
  if (arguments == nullptr || arguments[0] == 0) return;
  find_allocator();
  static char text[8192];
  static char* argv[64];
  if (std::strlen(arguments) >= sizeof text) refuse("RUNSEL_FIREFOX_REPLAY is too long");
  std::strcpy(text, arguments);
  int argc = 0;
  argv[argc++] = const_cast<char*>("runsel-replay-firefox");
  for (char* word = std::strtok(text, " "); word != nullptr && argc < 63;
       word = std::strtok(nullptr, " "))
    argv[argc++] = word;
  argv[argc] = nullptr;
  int code = runsel_replay_main(argc, argv);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}
