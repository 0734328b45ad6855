// Platform layer for Linux: mmap-based chunk mapping, madvise purging, futexes.
#include "platform/os.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

#include "platform/assert.h"
#include "platform/fatal.h"

namespace runsel::os {

namespace {

// A call into the allocator that succeeds leaves errno as it found it (C
// code sets errno = 0 and checks it afterwards), so every wrapper that may
// fail on a normal path (MAP_FIXED_NOREPLACE on an occupied range, a futex
// whose word changed) restores it. The front end sets errno itself when an
// allocation fails.
class KeepErrno {
 public:
  KeepErrno() : saved_(errno) {}
  ~KeepErrno() { errno = saved_; }
  KeepErrno(const KeepErrno&) = delete;
  KeepErrno& operator=(const KeepErrno&) = delete;

 private:
  int saved_;
};

void* map_anywhere(std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

void* map_aligned(std::size_t size, std::size_t alignment) {
  RUNSEL_ASSERT(alignment >= 4096 && (alignment & (alignment - 1)) == 0);
  KeepErrno keep_errno;
  // Optimistically map exactly `size`; most kernels hand out addresses that
  // continue earlier mappings, which are often aligned already.
  void* p = map_anywhere(size);
  if (p == nullptr) return nullptr;
  std::uintptr_t address = reinterpret_cast<std::uintptr_t>(p);
  if ((address & (alignment - 1)) == 0) return p;
  unmap(p, size);

  // Over-map by the alignment and trim both ends.
  if (size + alignment < size) return nullptr;
  p = map_anywhere(size + alignment);
  if (p == nullptr) return nullptr;
  address = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t aligned = (address + alignment - 1) & ~(alignment - 1);
  std::size_t lead = aligned - address;
  std::size_t trail = alignment - lead;
  if (lead != 0) unmap(p, lead);
  if (trail != 0) unmap(reinterpret_cast<void*>(aligned + size), trail);
  return reinterpret_cast<void*>(aligned);
}

bool map_fixed_if_free(void* address, std::size_t size) {
  KeepErrno keep_errno;
  void* p = mmap(address, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return false;
  if (p != address) {  // kernels before 4.17 ignore MAP_FIXED_NOREPLACE
    unmap(p, size);
    return false;
  }
  return true;
}

void unmap(void* address, std::size_t size) {
  KeepErrno keep_errno;
  munmap(address, size);
}

void purge(void* address, std::size_t size) {
  KeepErrno keep_errno;
  madvise(address, size, MADV_DONTNEED);
}

void protect_none(void* address, std::size_t size) {
  KeepErrno keep_errno;
  mprotect(address, size, PROT_NONE);
}

void futex_wait(std::uint32_t* word, std::uint32_t expected) {
  KeepErrno keep_errno;
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_one(std::uint32_t* word) {
  KeepErrno keep_errno;
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

std::uintptr_t random_word() {
  std::uintptr_t word = 0;
  if (const void* bytes = reinterpret_cast<const void*>(getauxval(AT_RANDOM))) {
    __builtin_memcpy(&word, bytes, sizeof(word));
  }
  return word;
}

std::uint64_t monotonic_ns() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return std::uint64_t(now.tv_sec) * 1'000'000'000u + std::uint64_t(now.tv_nsec);
}

unsigned cpu_count() {
  KeepErrno keep_errno;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

namespace {
constinit thread_local bool t_holding_locks_for_fork = false;
}  // namespace

void set_holding_locks_for_fork(bool holding) { t_holding_locks_for_fork = holding; }

void fatal_lock_reentered() {
  if (t_holding_locks_for_fork) {
    fatal(
        "malloc or free called from a pthread_atfork handler that runs while runsel holds "
        "its locks for fork() (one registered before runsel's own): aborting instead of "
        "deadlocking");
  }
  fatal(
      "malloc or free re-entered on a thread that is inside the allocator (called from a "
      "signal handler?): aborting instead of deadlocking");
}

}  // namespace runsel::os
