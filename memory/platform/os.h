// Platform layer: the only place that talks to the kernel about memory
// (mmap, munmap, madvise, mprotect) and about waiting (futex).
#pragma once

#include <sys/single_threaded.h>

#include <cstddef>
#include <cstdint>

namespace runsel::os {

// Maps `size` bytes of zeroed, private anonymous memory aligned to `alignment`
// (a power of two, at least the page size). Returns nullptr on failure.
void* map_aligned(std::size_t size, std::size_t alignment);
// Maps `size` bytes exactly at `address` if that range is free; false if not.
bool map_fixed_if_free(void* address, std::size_t size);
void unmap(void* address, std::size_t size);
// Gives pages back to the kernel; they read as zero when touched again.
void purge(void* address, std::size_t size);
// Makes a page range inaccessible (guard pages).
void protect_none(void* address, std::size_t size);

// A monotonic clock in nanoseconds, coarse (a few milliseconds) and cheap:
// good enough for purge delays and decay epochs.
std::uint64_t monotonic_ns();

// Waits while *word == expected (futex); wake_one wakes one waiter.
void futex_wait(std::uint32_t* word, std::uint32_t expected);
void futex_wake_one(std::uint32_t* word);

// A random word for this process (the kernel's AT_RANDOM bytes), for check
// values in allocator metadata.
std::uintptr_t random_word();

// CPUs this process may run on (sched_getaffinity), at least 1.
unsigned cpu_count();

// True until the process starts its first thread, then false for good (glibc
// clears the flag in pthread_create and never sets it again).
inline bool single_threaded() { return __libc_single_threaded != 0; }

// Tells the CPU we are spinning.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A thread asked for an allocator lock it already holds: malloc or free
// called from a signal handler that interrupted one of them. Writes one line
// on stderr and aborts (waiting would wait for ourselves forever).
[[noreturn]] void fatal_lock_reentered();
// Between runsel's fork preparation and the end of fork() on this thread
// (every allocator lock held): a re-entry then comes from a fork handler
// registered before runsel's, and fatal_lock_reentered says so.
void set_holding_locks_for_fork(bool holding);

}  // namespace runsel::os
