// A small futex mutex (three states: free, locked, locked with waiters).
// Cheaper than pthread_mutex on the uncontended path, constexpr-constructible,
// and resettable in a forked child.
#pragma once

#include <atomic>
#include <cstdint>

#include "platform/os.h"

namespace runsel {

class Lock {
 public:
  constexpr Lock() = default;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  void lock() {
    std::uint32_t expected = kFree;
    if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
    lock_slow();
  }

  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) {
      os::futex_wake_one(word());
    }
  }

  // Only for a forked child, where the thread that held the lock is gone.
  void reset_in_child() { state_.store(kFree, std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t kFree = 0, kLocked = 1, kContended = 2;

  void lock_slow() {
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
};

class LockGuard {
 public:
  explicit LockGuard(Lock& lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& lock_;
};

}  // namespace runsel
