// The purge policies' names and the decay schedule (purge.h). Nothing here
// needs an arena, so the decay schedule's unit test links this file alone;
// the arena's purge is purge.cpp.
#include <cstring>

#include "arena/purge.h"

namespace runsel {

namespace {
constexpr const char* kNames[] = {"budget", "deferred", "decay"};
}  // namespace

const char* purge_policy_name(PurgePolicy policy) {
  return kNames[static_cast<std::size_t>(policy)];
}

bool parse_purge_policy(const char* text, std::size_t length, PurgePolicy* out) {
  for (std::size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    if (std::strlen(kNames[i]) == length && std::memcmp(kNames[i], text, length) == 0) {
      *out = static_cast<PurgePolicy>(i);
      return true;
    }
  }
  return false;
}

std::size_t DirtyDecay::advance(std::uint64_t now, std::size_t dirty, std::uint64_t window_ns) {
  const std::uint64_t epoch = window_ns / kSteps > 0 ? window_ns / kSteps : 1;
  std::uint64_t closed = 1;
  if (next_epoch_ != 0 && now >= next_epoch_) closed += (now - next_epoch_) / epoch;
  if (closed > kSteps + 1) closed = kSteps + 1;  // enough to forget everything
  // Every page dirtied since the last step was dirtied in the epoch that step
  // saw as current (each free checks the clock), which is the first one that
  // closed now; the epochs after it saw no frees.
  newest_ = (newest_ + 1) % kSteps;
  dirtied_[newest_] = dirtied_now_;
  dirtied_now_ = 0;
  for (std::uint64_t i = 1; i < closed; ++i) {
    newest_ = (newest_ + 1) % kSteps;
    dirtied_[newest_] = 0;
  }
  next_epoch_ = now + epoch;

  std::size_t allowed = 0;
  for (std::size_t age = 0; age < kSteps; ++age) {
    const std::size_t pages = dirtied_[(newest_ + kSteps - age) % kSteps];
    allowed += pages * (kSteps - age) / kSteps;
  }
  return allowed < dirty ? allowed : dirty;
}

}  // namespace runsel
