// The replay engine shared by runsel-replay-<container> (tools/trace/replay.cpp)
// and the harness's workload_replay (experiments/workloads/replay.cpp): applies one
// trace record (tools/trace/format.md) by making the same call on whatever serves
// malloc, and binds the recorded result address to the pointer the replay got, in
// a slot table mmap'd outside the allocator (address_table.h). Frees of addresses
// never bound are counted, not fatal; so are calls that failed in the replay only.
//
// What happens to a block besides being allocated and freed is the Blocks policy's.
// Both replays use WrittenBlocks (below): each block is written as the program
// wrote it, so resident memory is the program's; UntouchedBlocks only allocates
// and frees (for tests and cost counts that must not include the writes).
//
//   static constexpr bool kZeroResizeAsFreeAndMalloc;
//       true: a realloc(p, 0) that returned a block is replayed as free(p) and
//       malloc(0), the same calls under every allocator; false: as realloc(p, 0).
//   void zeroed(void* p, std::size_t bytes);
//       calloc returned p (bytes: count * size, 0 on overflow), before binding it.
//   void allocated(std::uint64_t address, void* p, std::size_t size,
//                  std::size_t written);
//       p (size bytes, the first `written` already holding their contents) was
//       just bound to address: by an allocation, or by a realloc that moved it.
//   std::size_t unbound(std::uint64_t address);
//       address's block left the slot table; returns the size given to allocated
//       or rebound (a policy that keeps no sizes returns 0).
//   void rebound(std::uint64_t address, std::size_t size);
//       a block unbound for a realloc that did not happen is bound again.
//   void freeing(void* p, std::size_t size);
//       before the replay of a traced free(p).
//   void dropped(std::size_t size);
//       after free(p) replayed a realloc(p, 0) that freed p.
//   void moved(std::size_t size);
//       a realloc gave a new block for this one (allocated follows for it).
#ifndef RUNSEL_TRACE_REPLAY_ENGINE_H
#define RUNSEL_TRACE_REPLAY_ENGINE_H

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "address_table.h"
#include "trace_format.h"

namespace runsel::trace {

// What the replay saw besides the calls themselves.
struct ReplayTally {
  std::uint64_t ops = 0;
  std::uint64_t unknown_pointers = 0;  // free/realloc of an address not live in the trace
  std::uint64_t failed = 0;            // the program got memory, the replay did not
  std::uint64_t reused_live = 0;       // an address returned again without a free
};

// The Blocks policy of a replay that only allocates and frees: nothing is written,
// counted or remembered besides the slot table.
struct UntouchedBlocks {
  static constexpr bool kZeroResizeAsFreeAndMalloc = false;
  void zeroed(void*, std::size_t) {}
  void allocated(std::uint64_t, void*, std::size_t, std::size_t) {}
  std::size_t unbound(std::uint64_t) { return 0; }
  void rebound(std::uint64_t, std::size_t) {}
  void freeing(void*, std::size_t) {}
  void dropped(std::size_t) {}
  void moved(std::size_t) {}
};

// The Blocks policy of a replay that touches memory the way the program did: all
// of a block's requested bytes are written when it is allocated (calloc's with
// zeros), a realloc keeps the bytes it copied and writes the new ones, and the
// first byte is read back when the block is freed, into a checksum the same under
// every allocator. Keeps each recorded address's requested size + 1 (0 is the
// table's "absent") in a slot table sized for the trace's peak of live blocks.
// Counter is told the live requested bytes:
//   void count_allocated(std::size_t size);
//   void count_freed(std::size_t size, std::uint64_t checked);
// kFreeAndMalloc: realloc(p, 0) that returned a block is replayed as free(p) and
// malloc(0) (the harness runs one trace under several allocators, which need not
// agree on realloc(p, 0)), or as realloc(p, 0) (one allocator, as recorded).
template <class Counter, bool kFreeAndMalloc>
class WrittenBlocks {
 public:
  static constexpr bool kZeroResizeAsFreeAndMalloc = kFreeAndMalloc;

  WrittenBlocks(Counter& counter, std::size_t peak_live)
      : counter_(counter), sizes_(peak_live, true) {}

  static unsigned char fill_byte(std::size_t size) {
    return static_cast<unsigned char>((size * 131) | 1);
  }

  void zeroed(void* p, std::size_t bytes) {  // the zeros written, the first byte marked
    if (bytes == 0) return;
    std::memset(p, 0, bytes);
    static_cast<unsigned char*>(p)[0] = fill_byte(bytes);
  }

  void allocated(std::uint64_t address, void* p, std::size_t size, std::size_t written) {
    auto* bytes = static_cast<unsigned char*>(p);
    if (size > written) std::memset(bytes + written, fill_byte(size), size - written);
    sizes_.insert(address, reinterpret_cast<void*>(size + 1));
    counter_.count_allocated(size);
  }

  std::size_t unbound(std::uint64_t address) {
    return reinterpret_cast<std::size_t>(sizes_.erase(address)) - 1;
  }

  void rebound(std::uint64_t address, std::size_t size) {
    sizes_.insert(address, reinterpret_cast<void*>(size + 1));
  }

  void freeing(void* p, std::size_t size) {
    counter_.count_freed(size, size + (size > 0 ? *static_cast<unsigned char*>(p) : 0));
  }

  void dropped(std::size_t size) { counter_.count_freed(size, size); }
  void moved(std::size_t size) { counter_.count_freed(size, 0); }  // its contents went along

  const AddressTable& sizes() const { return sizes_; }

 private:
  Counter& counter_;
  AddressTable sizes_;
};

template <class Blocks>
class ReplayEngine {
 public:
  // Slots that grow as needed.
  ReplayEngine() = default;
  // Slots for `live` bindings without growing; with `touch`, resident from now on.
  // The remaining arguments construct the Blocks policy.
  template <class... BlockArgs>
  ReplayEngine(std::size_t live, bool touch, BlockArgs&&... block_args)
      : slots_(live, touch), blocks_(std::forward<BlockArgs>(block_args)...) {}

  void step(const Record& r) {
    ++tally_.ops;
    switch (r.op) {
      case Op::malloc:
        return bind(r.result, malloc(r.size), r.size, 0);
      case Op::calloc: {
        std::uint64_t bytes = 0;
        if (__builtin_mul_overflow(r.count, r.size, &bytes)) bytes = 0;
        void* p = calloc(r.count, r.size);
        if (p != nullptr) blocks_.zeroed(p, bytes);
        return bind(r.result, p, bytes, bytes);  // zeroed: its contents are there
      }
      case Op::aligned_alloc:
        return bind(r.result, aligned_alloc(r.alignment, r.size), r.size, 0);
      case Op::memalign:
        return bind(r.result, memalign(r.alignment, r.size), r.size, 0);
      case Op::valloc:
        return bind(r.result, valloc(r.size), r.size, 0);
      case Op::pvalloc:
        return bind(r.result, pvalloc(r.size), r.size, 0);
      case Op::posix_memalign: {
        void* p = nullptr;
        if (posix_memalign(&p, r.alignment, r.size) != 0) p = nullptr;
        return bind(r.result, p, r.size, 0);
      }
      case Op::free:
        return release(r.input);
      case Op::mark:  // a checkpoint: the caller reports it
        return;
      case Op::realloc:
      case Op::reallocarray:
        return resize(r);
    }
  }

  const ReplayTally& tally() const { return tally_; }
  std::size_t live() const { return slots_.size(); }
  std::size_t slot_table_bytes() const { return slots_.bytes(); }
  const AddressTable& slots() const { return slots_; }
  const Blocks& blocks() const { return blocks_; }

 private:
  // The program's call returned `address`; the replay's returned p (size bytes, of
  // which the first `written` already hold their contents).
  void bind(std::uint64_t address, void* p, std::size_t size, std::size_t written) {
    if (p == nullptr) {
      if (address != 0) ++tally_.failed;
      return;
    }
    if (address == 0) {  // the program's call failed: keep nothing live
      free(p);
      return;
    }
    // An address returned again without a free: the free was not traced (e.g. it
    // happened before the recorder started). The older block stays allocated.
    if (slots_.insert(address, p) != nullptr) ++tally_.reused_live;
    blocks_.allocated(address, p, size, written);
  }

  // Unbinds address: its block (or nullptr) and, from the policy, its size.
  void* unbind(std::uint64_t address, std::size_t& size) {
    void* p = slots_.erase(address);
    size = p == nullptr ? 0 : blocks_.unbound(address);
    return p;
  }

  void rebind(std::uint64_t address, void* p, std::size_t size) {
    slots_.insert(address, p);
    blocks_.rebound(address, size);
  }

  void release(std::uint64_t address) {
    if (address == 0) return;
    std::size_t size = 0;
    void* p = unbind(address, size);
    if (p == nullptr) {
      ++tally_.unknown_pointers;
      return;
    }
    blocks_.freeing(p, size);
    free(p);
  }

  void resize(const Record& r) {
    void* old = nullptr;
    std::size_t old_size = 0;
    if (r.input != 0) {
      old = unbind(r.input, old_size);
      if (old == nullptr) ++tally_.unknown_pointers;  // replayed as an allocation
    }
    std::uint64_t bytes = r.size;
    bool overflow = r.op == Op::reallocarray && __builtin_mul_overflow(r.count, r.size, &bytes);
    if (r.result == 0 && old != nullptr) {
      // glibc's realloc(p, 0) frees p and returns NULL; a failed one leaves p.
      if (bytes == 0 && !overflow) {
        free(old);
        blocks_.dropped(old_size);
      } else {
        rebind(r.input, old, old_size);
      }
      return;
    }
    if constexpr (Blocks::kZeroResizeAsFreeAndMalloc) {
      if (bytes == 0 && !overflow) {
        // realloc(p, 0) that returned a block: not every allocator does, so free
        // and allocate 0 bytes instead, the same calls under every allocator.
        if (old != nullptr) {
          free(old);
          blocks_.dropped(old_size);
        }
        return bind(r.result, malloc(0), 0, 0);
      }
    }
    void* p = r.op == Op::realloc ? realloc(old, r.size) : reallocarray(old, r.count, r.size);
    if (p == nullptr) {
      if (old != nullptr) rebind(r.input, old, old_size);  // still live
      return bind(r.result, nullptr, 0, 0);
    }
    if (old != nullptr) blocks_.moved(old_size);
    bind(r.result, p, bytes, old_size < bytes ? old_size : bytes);
  }

  AddressTable slots_;
  Blocks blocks_;
  ReplayTally tally_;
};

// What a replay needs to know before it starts, from one validating pass: the
// records, the marks, the most blocks live at once (to size slot tables that never
// grow), and where the trace's live requested bytes peak (the same record for every
// allocator, so figures there compare).
struct TraceSurvey {
  Header header;
  Problem problem;  // set when the trace is malformed
  bool complete = false;
  std::uint64_t records = 0;  // when the survey stopped early: the records read
  std::uint64_t marks = 0;
  std::size_t peak_live_blocks = 0;
  std::uint64_t peak_live_bytes = 0;
  std::uint64_t peak_ops = 0;  // records up to and including the one that reached the peak
  // The survey stopped early, the trace unread past `records` (problem unset):
  bool beyond_block_limit = false;     // the next record made more live blocks than allowed
  std::size_t table_failed_bytes = 0;  // its own table could not grow to this (errno below)
  int table_failed_errno = 0;
};

// block_limit: the most live blocks the caller can hold slot tables for. A trace that
// has more at once stops the survey there (beyond_block_limit), before its own table
// grows past what the replay's could be.
inline bool survey_trace(const std::uint8_t* data, std::size_t size, bool partial,
                         TraceSurvey& survey, std::size_t block_limit = SIZE_MAX) {
  Reader reader(data, size, partial);
  if (!reader.read_header(survey.header)) {
    survey.problem = reader.problem();
    return false;
  }
  AddressTable sizes;  // recorded address -> requested size + 1
  std::uint64_t live = 0;
  auto drop = [&](std::uint64_t address) {
    void* size = address ? sizes.erase(address) : nullptr;
    if (size != nullptr) live -= reinterpret_cast<std::uint64_t>(size) - 1;
    return size;
  };
  auto stopped = [&] {
    survey.records = reader.records();
    return false;
  };
  Record r;
  while (reader.next(r)) {
    std::uint64_t bytes = r.size;
    if (has_count(r.op) && __builtin_mul_overflow(r.count, r.size, &bytes)) bytes = 0;
    if (r.op == Op::mark) {
      ++survey.marks;
    } else if (r.op == Op::free) {
      drop(r.input);
    } else if (has_input(r.op) && r.result == 0) {  // realloc(p, 0) freed p; a failed one kept it
      if (bytes == 0) drop(r.input);
    } else {
      if (has_input(r.op)) drop(r.input);
      if (r.result != 0) {
        drop(r.result);  // an address returned again without a free replaces its block
        if (sizes.size() >= block_limit) {
          survey.peak_live_blocks = sizes.size() + 1;
          survey.beyond_block_limit = true;
          return stopped();
        }
        sizes.insert(r.result, reinterpret_cast<void*>(bytes + 1));
        if (sizes.failed()) {
          survey.table_failed_bytes = sizes.failed_bytes();
          survey.table_failed_errno = sizes.failed_errno();
          return stopped();
        }
        // Claimed sizes may add up past 2^64: the peak then stays at the maximum.
        if (__builtin_add_overflow(live, bytes, &live)) live = UINT64_MAX;
      }
    }
    if (sizes.size() > survey.peak_live_blocks) survey.peak_live_blocks = sizes.size();
    if (live > survey.peak_live_bytes) {
      survey.peak_live_bytes = live;
      survey.peak_ops = reader.records();
    }
  }
  if (reader.failed()) {
    survey.problem = reader.problem();
    return false;
  }
  survey.records = reader.records();
  survey.complete = reader.complete();
  return true;
}

// What runsel-replay holds at most (format.md, "Replaying"), checked against the
// memory it may use before any call: the trace file (mapped and read), the
// replayer's own code, stack and buffers, and then either the survey's table at its
// largest (while it grows, the old table and the new) or, once that is gone, the
// replay's two slot tables (address -> block, address -> size, sized for the trace's
// peak of live blocks and written at once) with the live blocks: their requested
// bytes and 32 bytes a block (the smallest region, which malloc(0) takes too, the
// rounding up to a size class and the allocator's bookkeeping). An estimate of the
// blocks, exact for the tables. Sums saturate.
inline constexpr std::uint64_t kReplayerOwnBytes = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kBytesPerBlock = 32;

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

struct ReplayHolding {
  std::uint64_t trace = 0;  // the trace file's bytes
  std::uint64_t replayer = kReplayerOwnBytes;
  std::uint64_t survey_table = 0;  // at its largest, while it grows
  std::uint64_t slot_tables = 0;   // both of the replay's
  std::uint64_t per_block = 0;     // kBytesPerBlock for each live block at the peak
  std::uint64_t live = 0;          // the peak of live requested bytes

  // Without the live blocks: what must fit even when they need not (--allow-large-live-set).
  std::uint64_t tables() const {
    return saturating_add(saturating_add(trace, replayer),
                          survey_table > slot_tables ? survey_table : slot_tables);
  }
  // Everything but the live requested bytes themselves.
  std::uint64_t own() const {
    std::uint64_t replay = saturating_add(slot_tables, per_block);
    return saturating_add(saturating_add(trace, replayer),
                          survey_table > replay ? survey_table : replay);
  }
  std::uint64_t total() const { return saturating_add(own(), live); }
};

inline ReplayHolding replay_holding(std::uint64_t trace_bytes, std::uint64_t live_blocks,
                                    std::uint64_t live_bytes) {
  ReplayHolding holding;
  holding.trace = trace_bytes;
  std::uint64_t table = AddressTable::bytes_for(live_blocks);
  holding.survey_table = saturating_add(table, table / 2);
  holding.slot_tables = saturating_add(table, table);
  holding.per_block =
      live_blocks > UINT64_MAX / kBytesPerBlock ? UINT64_MAX : live_blocks * kBytesPerBlock;
  holding.live = live_bytes;
  return holding;
}

// The most live blocks whose slot tables fit within `bound` beside the trace and the
// replayer (0 when not even the smallest tables do): the survey's block_limit.
inline std::size_t blocks_within(std::uint64_t trace_bytes, std::uint64_t bound) {
  std::size_t fitting = 0;
  for (std::size_t capacity = AddressTable::kMinCapacity;
       capacity <= SIZE_MAX / (4 * AddressTable::kSlotBytes); capacity *= 2) {
    std::size_t blocks = capacity / 2 - 1;  // the most a table of this capacity is sized for
    if (replay_holding(trace_bytes, blocks, 0).tables() > bound) break;
    fitting = blocks;
  }
  return fitting;
}

// The memory a replay may fill: the kernel's MemAvailable (what can be allocated
// without swapping or the OOM killer), or the physical memory where /proc/meminfo
// has no such line; less when the process has limits: the address space left under
// RLIMIT_AS (ulimit -v: an mmap beyond it fails) and the data left under RLIMIT_DATA
// (ulimit -d: private writable mappings count). A trace whose replay would hold
// more (ReplayHolding) is refused before any call; `--allow-large-live-set` replays
// it anyway when its slot tables fit. No allocation: the replayer's heap is the
// trace's.
struct MemoryBound {
  std::uint64_t bytes = 0;
  const char* what = "";  // where the figure comes from, for the message
};

// The number after `key` in a /proc file of "Key: value [kB]" lines (its first
// `scale` multiplies it), or UINT64_MAX when the file or the line is missing.
inline std::uint64_t proc_value(const char* path, const char* key, std::uint64_t scale) {
  static char text[16384];
  std::size_t used = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return UINT64_MAX;
  for (ssize_t n;
       used + 1 < sizeof text && (n = read(fd, text + used, sizeof text - 1 - used)) > 0;)
    used += static_cast<std::size_t>(n);
  close(fd);
  text[used] = 0;
  for (const char* line = text; line != nullptr && *line != 0;) {
    if (std::strncmp(line, key, std::strlen(key)) == 0)
      return std::strtoull(line + std::strlen(key), nullptr, 10) * scale;
    line = std::strchr(line, '\n');
    if (line != nullptr) ++line;
  }
  return UINT64_MAX;
}

inline MemoryBound replay_memory_bound() {
  MemoryBound bound{proc_value("/proc/meminfo", "MemAvailable:", 1024),
                    "memory available (MemAvailable)"};
  if (bound.bytes == UINT64_MAX) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    bound = {pages > 0 && page > 0
                 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                 : UINT64_MAX,
             "physical memory"};
  }
  struct Limit {
    int resource;
    const char* used;  // its use now, in /proc/self/status
    const char* what;
  };
  static const Limit limits[] = {
      {RLIMIT_AS, "VmSize:", "address space left under the limit (ulimit -v)"},
      {RLIMIT_DATA, "VmData:", "data left under the limit (ulimit -d)"},
  };
  for (const Limit& limit : limits) {
    struct rlimit value;
    if (getrlimit(limit.resource, &value) != 0 || value.rlim_cur == RLIM_INFINITY) continue;
    std::uint64_t used = proc_value("/proc/self/status", limit.used, 1024);
    if (used == UINT64_MAX) used = 0;
    std::uint64_t left = value.rlim_cur > used ? value.rlim_cur - used : 0;
    if (left < bound.bytes) bound = {left, limit.what};
  }
  return bound;
}

}  // namespace runsel::trace

#endif
