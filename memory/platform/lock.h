// A small futex mutex (three states: free, locked, locked with waiters).
// Cheaper than pthread_mutex on the uncontended path, constexpr-constructible,
// and resettable in a forked child. A thread that asks again for a lock it
// holds (malloc called from a signal handler that interrupted malloc) aborts
// with one line instead of waiting for itself forever. While the process has
// a single thread the lock is a plain load and store of its state, with no
// owner bookkeeping. Nobody else can contend, and no thread can start while
// runsel holds a lock. So a lock found taken can only be this thread's, held
// by the code a signal handler interrupted: a re-entry, reported at once.
#pragma once

#include <atomic>
#include <cstdint>

#include "platform/assert.h"
#include "platform/os.h"

// clang's thread-safety analysis (-Wthread-safety, on in clang builds): which
// lock guards which data and which functions expect it held or not held. The
// attributes compile to nothing elsewhere.
#if defined(__clang__)
#define RUNSEL_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define RUNSEL_THREAD_ATTRIBUTE(x)
#endif
#define RUNSEL_CAPABILITY(name) RUNSEL_THREAD_ATTRIBUTE(capability(name))
#define RUNSEL_SCOPED_CAPABILITY RUNSEL_THREAD_ATTRIBUTE(scoped_lockable)
#define RUNSEL_GUARDED_BY(lock) RUNSEL_THREAD_ATTRIBUTE(guarded_by(lock))
#define RUNSEL_REQUIRES(...) RUNSEL_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define RUNSEL_EXCLUDES(...) RUNSEL_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
#define RUNSEL_ACQUIRE(...) RUNSEL_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define RUNSEL_RELEASE(...) RUNSEL_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define RUNSEL_ASSERT_CAPABILITY(x) RUNSEL_THREAD_ATTRIBUTE(assert_capability(x))
#define RUNSEL_TRY_ACQUIRE(...) RUNSEL_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
// The lock order (memory/README.md, "Lock order"): a lock declared
// RUNSEL_ACQUIRED_BEFORE(other) is never taken while `other` is held.
#define RUNSEL_ACQUIRED_BEFORE(...) RUNSEL_THREAD_ATTRIBUTE(acquired_before(__VA_ARGS__))
// For the few functions whose locking the analysis cannot follow (the fork
// handlers take every arena's lock in a loop); each says why.
#define RUNSEL_NO_THREAD_SAFETY_ANALYSIS RUNSEL_THREAD_ATTRIBUTE(no_thread_safety_analysis)

namespace runsel {

class Lock;

namespace lock_detail {
// The calling thread's identity: the address of its own copy of this byte.
inline constinit thread_local char t_self = 0;
// The lock this thread is between asking for and recording itself as owner
// of (a signal can arrive in that gap), else null.
inline constinit thread_local const Lock* t_acquiring = nullptr;
}  // namespace lock_detail

class RUNSEL_CAPABILITY("mutex") Lock {
 public:
  constexpr Lock() = default;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  void lock() RUNSEL_ACQUIRE() {
    if (os::single_threaded()) {
      lock_single_threaded();
      return;
    }
    const Lock* outer = lock_detail::t_acquiring;
    lock_detail::t_acquiring = this;
    std::uint32_t expected = kFree;
    if (!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      lock_slow(outer);
    }
    owner_.store(&lock_detail::t_self, std::memory_order_relaxed);
    lock_detail::t_acquiring = outer;
  }

  // Takes the lock only if it is free (never waits); true if taken. Only
  // while the process has threads.
  bool try_lock() RUNSEL_TRY_ACQUIRE(true) {
    const Lock* outer = lock_detail::t_acquiring;
    lock_detail::t_acquiring = this;
    std::uint32_t expected = kFree;
    const bool taken = state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                                      std::memory_order_relaxed);
    if (taken) owner_.store(&lock_detail::t_self, std::memory_order_relaxed);
    lock_detail::t_acquiring = outer;
    return taken;
  }

  void unlock() RUNSEL_RELEASE() {
    if (os::single_threaded()) {
      unlock_single_threaded();
      return;
    }
    // Between clearing the owner and freeing the state the lock is held by
    // nobody's name: a signal arriving there must still count as a re-entry.
    const Lock* outer = lock_detail::t_acquiring;
    lock_detail::t_acquiring = this;
    owner_.store(nullptr, std::memory_order_relaxed);
    if (state_.exchange(kFree, std::memory_order_release) == kContended) {
      os::futex_wake_one(word());
    }
    lock_detail::t_acquiring = outer;
  }

  // lock() and unlock() while the process has one thread, for a caller that
  // has just seen os::single_threaded(): they call nothing but the abort of a
  // re-entry, so a path that uses them keeps nothing across a call.
  void lock_single_threaded() RUNSEL_ACQUIRE() {
    // A signal between the load and the store finds the lock free and
    // leaves it free when its handler returns.
    if (state_.load(std::memory_order_relaxed) != kFree) os::fatal_lock_reentered();
    state_.store(kLocked, std::memory_order_relaxed);
  }
  void unlock_single_threaded() RUNSEL_RELEASE() {
    // Taken while the process had threads (it has one again)? Then it has an owner.
    owner_.store(nullptr, std::memory_order_relaxed);
    state_.store(kFree, std::memory_order_relaxed);
  }

  // Checks, where assertions are on, that the calling thread holds the lock,
  // and tells the analysis so where it cannot follow (a helper that reaches
  // the lock through another object).
  void assert_held() const RUNSEL_ASSERT_CAPABILITY(this) {
    RUNSEL_ASSERT(state_.load(std::memory_order_relaxed) != kFree);
    // Taken while the process had one thread, a lock has no owner; no thread
    // can start while runsel holds it.
    RUNSEL_ASSERT(os::single_threaded() ||
                  owner_.load(std::memory_order_relaxed) == &lock_detail::t_self);
  }

  // Only for a forked child, where the thread that held the lock is gone.
  void reset_in_child() {
    owner_.store(nullptr, std::memory_order_relaxed);
    state_.store(kFree, std::memory_order_relaxed);
  }

 private:
  static constexpr std::uint32_t kFree = 0, kLocked = 1, kContended = 2;

  // `outer`: what t_acquiring was before this call. If this thread owns the
  // lock, or was interrupted between taking it and recording that (or between
  // clearing its name and releasing it), nobody else can release it.
  void lock_slow(const Lock* outer) {
    if (owner_.load(std::memory_order_relaxed) == &lock_detail::t_self || outer == this) {
      os::fatal_lock_reentered();
    }
    for (int spin = 0; spin < 100; ++spin) {
      std::uint32_t expected = kFree;
      if (state_.load(std::memory_order_relaxed) == kFree &&
          state_.compare_exchange_weak(expected, kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
      os::cpu_relax();
    }
    while (state_.exchange(kContended, std::memory_order_acquire) != kFree) {
      os::futex_wait(word(), kContended);
    }
  }

  std::uint32_t* word() { return reinterpret_cast<std::uint32_t*>(&state_); }

  std::atomic<std::uint32_t> state_{kFree};
  std::atomic<const char*> owner_{nullptr};  // the holder's lock_detail::t_self, or null
};

class RUNSEL_SCOPED_CAPABILITY LockGuard {
 public:
  explicit LockGuard(Lock& lock) RUNSEL_ACQUIRE(lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() RUNSEL_RELEASE() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& lock_;
};

}  // namespace runsel
