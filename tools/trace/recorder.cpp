// librunsel-trace.so: preloaded into any program (LD_PRELOAD), records every
// allocation call to the trace file named by RUNSEL_TRACE and forwards it to
// the next allocator (dlsym RTLD_NEXT). Format: tools/trace/format.md.
//
// Ordering: one buffer under one lock gives the trace a single total order.
// A free is recorded before the memory is released and an allocation after it
// is obtained, so an address is never recorded as reused before its free;
// realloc runs under the lock because it frees and allocates in one call.
//
// Checkpoint marks: a driver publishes labels in the file named by
// RUNSEL_TRACE_MARKS (layout in format.md); every recorded call looks at the
// published count once (a relaxed load) and writes a mark record for each label
// that appeared since the previous call.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "trace_format.h"

#define RUNSEL_TRACE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace runsel::trace;

struct RealFunctions {
  void* (*malloc)(size_t) = nullptr;
  void* (*calloc)(size_t, size_t) = nullptr;
  void* (*realloc)(void*, size_t) = nullptr;
  void (*free)(void*) = nullptr;
  int (*posix_memalign)(void**, size_t, size_t) = nullptr;
  void* (*aligned_alloc)(size_t, size_t) = nullptr;
  void* (*memalign)(size_t, size_t) = nullptr;
  void* (*valloc)(size_t) = nullptr;
  void* (*pvalloc)(size_t) = nullptr;
  void* (*reallocarray)(void*, size_t, size_t) = nullptr;
};
RealFunctions real;

// --- bootstrap: dlsym may allocate while we look up the real functions ---------

// Bump allocator for the few calls made during dlsym; never freed to the real
// allocator. Each block is preceded by its size, so realloc can copy it.
alignas(64) unsigned char bootstrap_arena[64 * 1024];
std::atomic<std::size_t> bootstrap_used{0};
thread_local bool resolving = false;

bool is_bootstrap(const void* p) {
  auto* byte = static_cast<const unsigned char*>(p);
  return byte >= bootstrap_arena && byte < bootstrap_arena + sizeof bootstrap_arena;
}

void* bootstrap_allocate(std::size_t size) {
  std::size_t need = 16 + ((size + 15) & ~std::size_t{15});
  std::size_t start = bootstrap_used.fetch_add(need);
  if (start + need > sizeof bootstrap_arena) return nullptr;
  std::memcpy(bootstrap_arena + start, &size, sizeof size);
  return bootstrap_arena + start + 16;  // the arena is zero: calloc is served too
}

std::size_t bootstrap_size(const void* p) {
  std::size_t size;
  std::memcpy(&size, static_cast<const unsigned char*>(p) - 16, sizeof size);
  return size;
}

template <typename F>
void resolve(F& function, const char* name) {
  function = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void resolve_all() {
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_acquire)) return;
  resolving = true;
  resolve(real.malloc, "malloc");
  resolve(real.calloc, "calloc");
  resolve(real.realloc, "realloc");
  resolve(real.free, "free");
  resolve(real.posix_memalign, "posix_memalign");
  resolve(real.aligned_alloc, "aligned_alloc");
  resolve(real.memalign, "memalign");
  resolve(real.valloc, "valloc");
  resolve(real.pvalloc, "pvalloc");
  resolve(real.reallocarray, "reallocarray");
  resolving = false;
  if (real.malloc == nullptr || real.free == nullptr) {
    static const char message[] = "runsel-trace: cannot find the next malloc\n";
    (void)!write(2, message, sizeof message - 1);
    _exit(127);
  }
  done.store(true, std::memory_order_release);
}

// --- the trace file -----------------------------------------------------------------

pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
unsigned char buffer[1 << 20];
std::size_t buffered = 0;
PointerCoder pointer_coder;
int trace_fd = -1;
bool disabled = false;      // no RUNSEL_TRACE, or the file could not be opened
bool exit_flushed = false;  // after the exit flush every record is written at once
std::uint64_t records_written = 0;
bool forked_child = false;
std::atomic<std::uint32_t> next_thread{0};
thread_local std::uint32_t thread_id = UINT32_MAX;
thread_local bool inside = false;  // a real function calling back into us

void write_all(const unsigned char* data, std::size_t size) {
  while (size > 0 && trace_fd >= 0) {
    ssize_t n = write(trace_fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void flush_locked() {
  write_all(buffer, buffered);
  buffered = 0;
}

// Writes what is buffered and the end record that closes a complete trace.
void flush_with_end_locked() {
  buffered = static_cast<std::size_t>(put_end(buffer + buffered, records_written) - buffer);
  flush_locked();
}

// RUNSEL_TRACE with each "%p" replaced by the pid; a forked child whose path
// has no "%p" gets ".<pid>" appended so it never overwrites its parent's file.
bool trace_path(char* out, std::size_t capacity) {
  const char* pattern = getenv("RUNSEL_TRACE");
  if (pattern == nullptr || *pattern == 0) return false;
  char pid[24];
  unsigned char digits[24];
  int length = 0;
  for (long value = getpid(); value > 0 || length == 0; value /= 10)
    digits[length++] = '0' + value % 10;
  for (int i = 0; i < length; ++i) pid[i] = static_cast<char>(digits[length - 1 - i]);
  pid[length] = 0;
  std::size_t used = 0;
  bool replaced = false;
  auto append = [&](const char* text, std::size_t n) {
    if (used + n >= capacity) return false;
    std::memcpy(out + used, text, n);
    used += n;
    return true;
  };
  for (const char* c = pattern; *c; ++c) {
    bool ok = (c[0] == '%' && c[1] == 'p') ? (replaced = true, ++c, append(pid, std::strlen(pid)))
                                           : append(c, 1);
    if (!ok) return false;
  }
  if (forked_child && !replaced && !(append(".", 1) && append(pid, std::strlen(pid)))) return false;
  out[used] = 0;
  return true;
}

// --- checkpoint marks ---------------------------------------------------------------

// The marks file: bytes 0..7 the count of labels published (little-endian, stored
// by the driver after the label bytes), labels from byte 64 on, each ended by NUL.
inline constexpr std::size_t kMarksFileSize = 65536;
inline constexpr std::size_t kMarksLabelsStart = 64;

struct Marks {
  const unsigned char* file = nullptr;  // mapped read-only, shared with the driver
  std::size_t size = 0;
  std::uint64_t seen = 0;                      // labels published before now
  std::size_t next_label = kMarksLabelsStart;  // where label number `seen` starts
  bool opened = false;
};
Marks marks;

std::uint64_t published_marks() {
  return __atomic_load_n(reinterpret_cast<const std::uint64_t*>(marks.file), __ATOMIC_RELAXED);
}

// Moves past label number `marks.seen`; its bytes and length go to label and
// length (cut to kMaxLabel, bytes outside printable ASCII made '?'). False when
// the file holds no complete label there: the file is not what the driver promised.
bool take_label(char* label, std::uint32_t& length) {
  std::size_t at = marks.next_label, end = at;
  while (end < marks.size && marks.file[end] != 0) ++end;
  if (end >= marks.size) return false;
  length = 0;
  for (std::size_t i = at; i < end && length < kMaxLabel; ++i)
    label[length++] = label_byte(marks.file[i]) ? static_cast<char>(marks.file[i]) : '?';
  if (length == 0) label[length++] = '?';  // an empty label still marks the point
  marks.next_label = end + 1;
  ++marks.seen;
  return true;
}

// Maps RUNSEL_TRACE_MARKS once per process (a forked child keeps the mapping and
// what its parent had seen). Labels published before are not this trace's.
void open_marks_locked() {
  if (marks.opened) return;
  marks.opened = true;
  const char* path = getenv("RUNSEL_TRACE_MARKS");
  if (path == nullptr || *path == 0) return;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat info;
  std::size_t size = 0;
  if (fstat(fd, &info) == 0 && info.st_size > 0)
    size = std::min(static_cast<std::size_t>(info.st_size), kMarksFileSize);
  void* file =
      size > kMarksLabelsStart ? mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (file == MAP_FAILED) return;
  marks.file = static_cast<const unsigned char*>(file);
  marks.size = size;
  std::uint64_t published = published_marks();
  std::atomic_thread_fence(std::memory_order_acquire);  // the labels before the count
  char label[kMaxLabel];
  std::uint32_t length = 0;
  while (marks.seen < published)
    if (!take_label(label, length)) break;
  marks.seen = published;
}

void append_locked(const Record& r, std::size_t longest) {
  if (buffered + longest + kEndRecord > sizeof buffer) flush_locked();
  buffered = static_cast<std::size_t>(put_record(buffer + buffered, r, pointer_coder) - buffer);
  ++records_written;
}

// One relaxed load per call; a mark record for each label published since.
void record_new_marks_locked(std::uint32_t thread) {
  if (marks.file == nullptr) return;
  std::uint64_t published = published_marks();
  if (published <= marks.seen) return;
  std::atomic_thread_fence(std::memory_order_acquire);
  char label[kMaxLabel];
  Record mark{.op = Op::mark, .thread = thread, .label = label};
  while (marks.seen < published) {
    if (!take_label(label, mark.label_length)) {
      marks.file = nullptr;  // a label without its NUL: stop reading the file
      return;
    }
    append_locked(mark, kMaxMarkRecord);
  }
}

void open_trace_locked() {
  char path[4096];
  if (!trace_path(path, sizeof path)) {
    disabled = true;
    return;
  }
  trace_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (trace_fd < 0) {
    disabled = true;
    return;
  }
  open_marks_locked();
  pointer_coder = PointerCoder{};
  records_written = 0;
  buffered = static_cast<std::size_t>(put_header(buffer, forked_child ? kFlagForkedChild : 0,
                                                 static_cast<std::uint64_t>(getpid())) -
                                      buffer);
}

void record_locked(Record& r) {
  if (trace_fd < 0 && !disabled) open_trace_locked();
  if (disabled) return;
  if (thread_id == UINT32_MAX) thread_id = next_thread.fetch_add(1);
  r.thread = thread_id;
  record_new_marks_locked(thread_id);  // published before this call took effect
  append_locked(r, kMaxRecord);
  if (exit_flushed) {  // replace the end record: this call came after it
    lseek(trace_fd, -static_cast<off_t>(kEndRecord), SEEK_CUR);
    flush_with_end_locked();
  }
}

// Serializes recording; reentrant calls (the real allocator calling malloc)
// are forwarded without being recorded.
class Recording {
 public:
  Recording() : active_(!inside) {
    if (active_) {
      inside = true;
      pthread_mutex_lock(&trace_lock);
    }
  }
  ~Recording() {
    if (active_) {
      pthread_mutex_unlock(&trace_lock);
      inside = false;
    }
  }
  void add(Record r) {
    if (active_) record_locked(r);
  }

 private:
  bool active_;
};

void record(const Record& r) {
  Recording recording;
  recording.add(r);
}

std::uint64_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// --- fork: the child writes its own file ----------------------------------------------

void before_fork() {
  pthread_mutex_lock(&trace_lock);
  flush_locked();  // the child must not write the parent's records again
}
void after_fork_parent() { pthread_mutex_unlock(&trace_lock); }
void after_fork_child() {
  if (trace_fd >= 0) close(trace_fd);
  trace_fd = -1;
  buffered = 0;
  forked_child = true;
  disabled = false;
  exit_flushed = false;
  pthread_mutex_unlock(&trace_lock);
}

__attribute__((constructor)) void start() {
  resolve_all();
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

// At exit, and from _exit (forked children often leave that way).
__attribute__((destructor)) void finish() {
  pthread_mutex_lock(&trace_lock);
  if (!exit_flushed && trace_fd >= 0) {
    record_new_marks_locked(thread_id == UINT32_MAX ? 0 : thread_id);  // the last ones
    flush_with_end_locked();
  }
  exit_flushed = true;  // frees made later in the exit sequence still get written
  pthread_mutex_unlock(&trace_lock);
}

}  // namespace

// --- the interposed functions ------------------------------------------------------

RUNSEL_TRACE_EXPORT void* malloc(size_t size) {
  if (resolving) return bootstrap_allocate(size);
  resolve_all();
  void* p = real.malloc(size);
  record({.op = Op::malloc, .size = size, .result = address(p)});
  return p;
}

RUNSEL_TRACE_EXPORT void* calloc(size_t count, size_t size) {
  if (resolving) return bootstrap_allocate(count * size);  // dlsym asks for little
  resolve_all();
  void* p = real.calloc(count, size);
  record({.op = Op::calloc, .size = size, .count = count, .result = address(p)});
  return p;
}

RUNSEL_TRACE_EXPORT void free(void* p) {
  if (p == nullptr || is_bootstrap(p)) return;
  resolve_all();
  record({.op = Op::free, .input = address(p)});
  real.free(p);
}

RUNSEL_TRACE_EXPORT void* realloc(void* p, size_t size) {
  if (resolving || is_bootstrap(p)) {  // move a bootstrap block out (or grow it)
    void* q = resolving ? bootstrap_allocate(size) : malloc(size);
    if (q != nullptr && is_bootstrap(p)) std::memcpy(q, p, std::min(size, bootstrap_size(p)));
    return q;
  }
  resolve_all();
  Recording recording;
  void* q = real.realloc(p, size);
  recording.add({.op = Op::realloc, .size = size, .input = address(p), .result = address(q)});
  return q;
}

RUNSEL_TRACE_EXPORT void* reallocarray(void* p, size_t count, size_t size) {
  if (!resolving) resolve_all();
  if (resolving || is_bootstrap(p) || real.reallocarray == nullptr) {
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) {
      errno = ENOMEM;
      return nullptr;
    }
    return realloc(p, bytes);
  }
  Recording recording;
  void* q = real.reallocarray(p, count, size);
  recording.add({.op = Op::reallocarray,
                 .size = size,
                 .count = count,
                 .input = address(p),
                 .result = address(q)});
  return q;
}

RUNSEL_TRACE_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  resolve_all();
  int error = real.posix_memalign(out, alignment, size);
  record({.op = Op::posix_memalign,
          .size = size,
          .alignment = alignment,
          .result = error == 0 ? address(*out) : 0});
  return error;
}

RUNSEL_TRACE_EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  resolve_all();
  void* p = real.aligned_alloc(alignment, size);
  record({.op = Op::aligned_alloc, .size = size, .alignment = alignment, .result = address(p)});
  return p;
}

RUNSEL_TRACE_EXPORT void* memalign(size_t alignment, size_t size) {
  resolve_all();
  void* p = real.memalign(alignment, size);
  record({.op = Op::memalign, .size = size, .alignment = alignment, .result = address(p)});
  return p;
}

RUNSEL_TRACE_EXPORT void* valloc(size_t size) {
  resolve_all();
  void* p = real.valloc(size);
  record({.op = Op::valloc, .size = size, .result = address(p)});
  return p;
}

RUNSEL_TRACE_EXPORT void* pvalloc(size_t size) {
  resolve_all();
  void* p = real.pvalloc(size);
  record({.op = Op::pvalloc, .size = size, .result = address(p)});
  return p;
}

// _exit skips destructors: flush first, then leave as _exit would.
RUNSEL_TRACE_EXPORT void _exit(int status) {
  finish();
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

RUNSEL_TRACE_EXPORT void _Exit(int status) noexcept { _exit(status); }
