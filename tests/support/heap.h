// Helpers for tests linked against a runsel variant: sizes, stats checks,
// resident memory, and which variant the test is meant to run.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "runsel.h"

namespace runsel_test {

inline constexpr size_t kPage = 4096;
inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr size_t kChunk = kMiB;  // runsel's chunk size

// With a thread cache (-Dthread_cache), the calling thread's cache is given
// back first, so that the figures show the bins as the program left them (a
// no-op without the cache).
inline runsel_stats_t snapshot() {
  runsel_thread_cache_flush();
  runsel_stats_t s;
  runsel_stats(&s);
  return s;
}

// The bytes the program holds: allocated less what the thread caches hold
// (thread_cached, part of allocated; 0 without the cache). Without the cache,
// allocated itself.
inline size_t live_bytes(const runsel_stats_t& s) { return s.allocated - s.thread_cached; }

// The allocation calls the arenas served between two snapshots taken by one
// thread that freed nothing in between. Without a thread cache, nmalloc counts
// the program's calls. With one (RUNSEL_THREAD_CACHE_BUILD), nmalloc and nfree
// count the regions batches took in and gave back, and snapshot() flushes the
// calling thread's cache: a small malloc took in a batch and the flush gave
// back all of it but the region handed out, so only nmalloc less nfree counts
// the program's calls.
inline size_t mallocs_between(const runsel_stats_t& before, const runsel_stats_t& after) {
#if RUNSEL_THREAD_CACHE_BUILD
  return (after.nmalloc - after.nfree) - (before.nmalloc - before.nfree);
#else
  return after.nmalloc - before.nmalloc;
#endif
}

// The right-hand side of the identity below.
inline size_t identity_sum(const runsel_stats_t& s) {
  return s.allocated + s.waste + s.dirty + s.bookkeeping + s.bin_unused;
}

// committed == allocated + waste + dirty + bookkeeping + bin_unused, exactly.
inline testing::AssertionResult IdentityHolds(const runsel_stats_t& s) {
  size_t sum = identity_sum(s);
  if (s.committed == sum) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "committed " << s.committed << " != allocated " << s.allocated << " + waste " << s.waste
         << " + dirty " << s.dirty << " + bookkeeping " << s.bookkeeping << " + bin_unused "
         << s.bin_unused << " = " << sum;
}

// Dirty bytes the purge policy in force may hold without the program's help:
// in the arenas, the budget per arena under "budget", 16 budgets under
// "deferred" (its bound for a purge that is queued but not yet run), no bound
// under "decay" (until its window has passed; stats_test checks that
// separately); plus the huge mappings' dirty pages, which the huge cache
// bounds (kHugeCacheBound by default).
inline constexpr size_t kHugeCacheBound = 64 * kMiB;
// With several arenas the process-wide budget (dirty_max_total) replaces the
// arenas' own: an arena that takes the total above it ("budget"), or above
// twice it ("deferred"), purges its own pages until the total is back under.
inline size_t dirty_bound(const runsel_stats_t& s) {
  const std::string policy = runsel_purge_policy();
  if (s.dirty_max_total != 0 && policy == "budget") return s.dirty_max_total + s.huge_dirty;
  if (s.dirty_max_total != 0 && policy == "deferred") return 2 * s.dirty_max_total + s.huge_dirty;
  if (policy == "budget") return s.dirty_max * s.narenas + s.huge_dirty;
  if (policy == "deferred") return 16 * s.dirty_max * s.narenas + s.huge_dirty;
  return SIZE_MAX;
}

// Resident memory of this process, from /proc/self/statm. Reads without
// stdio, which would allocate and free, leaving dirty pages behind.
inline size_t resident_bytes() {
  char text[128] = {};
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t length = read(fd, text, sizeof text - 1);
  close(fd);
  if (length <= 0) return 0;
  char* after_total = nullptr;
  strtoul(text, &after_total, 10);
  return strtoul(after_total, nullptr, 10) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// The variant this test binary was linked for. meson sets
// RUNSEL_EXPECTED_VARIANT per test (one object file serves every container);
// the tests compare it with what the loaded library reports, so a binary that
// picked up the wrong libmalloc, or glibc's malloc, fails.
inline std::string expected_variant() {
  const char* value = getenv("RUNSEL_EXPECTED_VARIANT");
  if (value && *value) return value;
  ADD_FAILURE() << "RUNSEL_EXPECTED_VARIANT is not set (meson test sets it; set it to the "
                   "container this binary is linked with when running it by hand)";
  return "(unset)";
}

// The loaded runsel library is the variant this binary was linked for.
inline testing::AssertionResult RunsExpectedVariant() {
  std::string loaded = runsel_variant(), expected = expected_variant();
  if (loaded == expected) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "runsel variant " << loaded << " is loaded, expected " << expected;
}

// Absolute path of the runsel library this process is linked with (the one
// that defines runsel_variant), to preload into child processes.
inline std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runsel_variant), &info) == 0 || !info.dli_fname) {
    ADD_FAILURE() << "dladdr cannot find the library that defines runsel_variant";
    return "";
  }
  char resolved[4096];
  return realpath(info.dli_fname, resolved) ? std::string(resolved) : std::string(info.dli_fname);
}

}  // namespace runsel_test
