// What runsel-replay counts as it replays: the live requested bytes (its blocks
// policy), and the heap's resident bytes, the process's anonymous resident memory
// less the replayer's own. Included by replay.cpp only.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "replay_engine.h"

namespace runsel::trace {

// Live requested bytes, as the replay's blocks policy counts them, and the checksum
// over the freed blocks (their sizes and first bytes, replay_engine.h) it prints.
struct LiveBytes {
  std::size_t live = 0;
  std::uint64_t checksum = 0;
  void count_allocated(std::size_t size) { live += size; }
  void count_freed(std::size_t size, std::uint64_t checked) {
    live -= size;
    checksum += checked;
  }
};

using Replay = ReplayEngine<WrittenBlocks<LiveBytes, false>>;

// Anonymous resident bytes of the whole process, from /proc/self/smaps_rollup:
// the kernel walks the page tables, so the figure is exact (statm's counters are
// per-CPU estimates). open/read into a static buffer: the replayer must not allocate.
inline std::size_t anonymous_resident_bytes() {
  static char text[8192];
  int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::size_t used = 0;
  for (ssize_t n;
       used + 1 < sizeof text && (n = read(fd, text + used, sizeof text - 1 - used)) > 0;)
    used += static_cast<std::size_t>(n);
  close(fd);
  text[used] = 0;
  const char* line = std::strstr(text, "\nAnonymous:");
  if (line == nullptr) return 0;
  return std::strtoull(line + std::strlen("\nAnonymous:"), nullptr, 10) * 1024;
}

// The heap's resident bytes: the process's anonymous resident memory less the
// replayer's own (its slot tables, and what was resident before the first call).
class HeapResident {
 public:
  explicit HeapResident(const Replay& replay) : replay_(replay) {}
  // Every buffer the measurement itself uses is written once first, so the
  // baseline holds it.
  void take_baseline() {
    own();
    anonymous_resident_bytes();
    std::size_t mine = own();
    baseline_ = anonymous_resident_bytes() - mine;
  }
  std::size_t now() const {
    std::size_t process = anonymous_resident_bytes(), other = own() + baseline_;
    return process > other ? process - other : 0;
  }
  std::size_t own() const {
    return replay_.slots().resident_bytes() + replay_.blocks().sizes().resident_bytes();
  }

 private:
  const Replay& replay_;
  std::size_t baseline_ = 0;
};

}  // namespace runsel::trace
