// librunsel-firefox-audit.so, the log half: records the allocation calls of a
// stock firefox-esr, whose executable holds mozjemalloc, as Mozilla logalloc
// lines, one gzip file per process (tools/firefox/README.md). audit.c, the audit
// interface, decides which calls reach the wrappers here.
//
// Ordering: one buffer under one lock. A free is written before the memory is
// released and an allocation after it is obtained, so an address never appears
// handed out twice while live; realloc runs under the lock (it frees and
// allocates in one call).
//
// Marks: a `jemalloc_stats()` line every RUNSEL_FIREFOX_EVERY calls (label "every"),
// one for each label a driver publishes in the file named by RUNSEL_FIREFOX_MARKS
// (the layout of tools/trace/format.md's marks file), noticed at the process's next
// call, and "exit" at exit; at each, the executable's own jemalloc_stats_internal
// figures go to the side file <pid>.marks.jsonl.
//
// This library lives in its own link namespace with its own libc, whose malloc
// is not Firefox's: nothing here is recorded or recurses.
#define _GNU_SOURCE
#include "recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zlib.h>

#include "stats_layout.h"
// --- the functions wrapped -------------------------------------------------------

const char* const function_names[F_COUNT] = {
    "malloc",
    "calloc",
    "realloc",
    "free",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "valloc",
    "strdup",
    "strndup",
    "moz_xmalloc",
    "moz_xcalloc",
    "moz_xrealloc",
    "moz_xmemalign",
    "moz_xstrdup",
    "moz_xstrndup",
    "moz_xmemdup",
    "moz_arena_malloc",
    "moz_arena_calloc",
    "moz_arena_realloc",
    "moz_arena_free",
    "moz_arena_memalign",
    "exit",
    "_exit",
    "_Exit",
};

uintptr_t real[F_COUNT];
uintptr_t wrapper[F_COUNT];

int function_named(const char* name) {
  if (name == NULL) return -1;
  for (int i = 0; i < F_COUNT; ++i)
    if (strcmp(name, function_names[i]) == 0) return i;
  return -1;
}
// --- per-process log -----------------------------------------------------------------

#define TEXT_BUFFER (256 * 1024)
#define GZIP_BUFFER (128 * 1024)

static struct {
  pthread_mutex_t lock;
  bool active;        // the executable is Firefox's: record
  bool stats_usable;  // the stats layout matched (stats_layout.h)
  pid_t pid;          // the process the open file belongs to
  int fd, marks_fd;
  z_stream gzip;
  char text[TEXT_BUFFER];
  size_t used;
  unsigned char out[GZIP_BUFFER];
  uint64_t lines, calls, mark_count, every;
  uint64_t seen_labels;                 // labels of the marks file already written
  size_t next_label;                    // byte offset of the next label in the marks file
  const volatile unsigned char* marks;  // the mapped marks file, or NULL
  char directory[512];
  jemalloc_stats_fn stats;
  num_bins_fn num_bins;
} log_state = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .marks_fd = -1};

static __thread pid_t cached_tid;
static __thread pid_t cached_tid_pid;

static void say(const char* message) {
  char line[600];
  int n =
      snprintf(line, sizeof line, "runsel firefox recorder (pid %d): %s\n", (int)getpid(), message);
  if (n > 0) (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void write_all(int fd, const void* data, size_t length) {
  const char* at = data;
  while (length > 0) {
    ssize_t n = write(fd, at, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // disk full or closed: the driver finds the log short
    at += n;
    length -= (size_t)n;
  }
}

static void compress_text(int flush) {
  z_stream* z = &log_state.gzip;
  z->next_in = (unsigned char*)log_state.text;
  z->avail_in = (unsigned)log_state.used;
  do {
    z->next_out = log_state.out;
    z->avail_out = GZIP_BUFFER;
    deflate(z, flush);
    write_all(log_state.fd, log_state.out, GZIP_BUFFER - z->avail_out);
  } while (z->avail_out == 0);
  log_state.used = 0;
}

static void side_record(const char* label);

// Opens <directory>/<pid>.log.gz for the current process. After a fork the child
// drops what it inherited (the parent writes its own buffer) and starts afresh.
static bool open_log(pid_t pid) {
  if (log_state.fd >= 0) close(log_state.fd);  // inherited from the parent: not ours
  log_state.fd = -1;
  log_state.pid = pid;
  log_state.used = log_state.lines = log_state.calls = log_state.mark_count = 0;
  char path[600];
  snprintf(path, sizeof path, "%s/%d.log.gz", log_state.directory, (int)pid);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    char message[700];
    snprintf(message, sizeof message, "cannot create %s: %s; this process is not recorded", path,
             strerror(errno));
    say(message);
    log_state.active = false;
    return false;
  }
  memset(&log_state.gzip, 0, sizeof log_state.gzip);  // an inherited stream is abandoned
  if (deflateInit2(&log_state.gzip, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    say("zlib's deflateInit2 failed; this process is not recorded");
    close(fd);
    log_state.active = false;
    return false;
  }
  log_state.fd = fd;
  if (log_state.marks_fd >= 0) close(log_state.marks_fd);
  snprintf(path, sizeof path, "%s/%d.marks.jsonl", log_state.directory, (int)pid);
  log_state.marks_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  return true;
}

// --- writing lines ---------------------------------------------------------------------

static char* put_decimal(char* at, uint64_t value) {
  char digits[24];
  int n = 0;
  do digits[n++] = (char)('0' + value % 10);
  while ((value /= 10) != 0);
  while (n > 0) *at++ = digits[--n];
  return at;
}

static char* put_pointer(char* at, uintptr_t value) {
  static const char hex[] = "0123456789abcdef";
  *at++ = '0';
  *at++ = 'x';
  char digits[20];
  int n = 0;
  do digits[n++] = hex[value & 15];
  while ((value >>= 4) != 0);
  while (n > 0) *at++ = digits[--n];
  return at;
}

static char* put_text(char* at, const char* text) {
  size_t n = strlen(text);
  memcpy(at, text, n);
  return at + n;
}

static pid_t current_tid(pid_t pid) {
  if (cached_tid_pid != pid) {  // a new thread, or the forked child's only thread
    cached_tid = (pid_t)syscall(SYS_gettid);
    cached_tid_pid = pid;
  }
  return cached_tid;
}

static void check_marks(void);

// One line: "<pid> <tid> name(a[,b])[=result]". Called with the lock held.
static void put_line(const char* name, int arguments, uint64_t a, bool a_pointer, uint64_t b,
                     bool has_result, uintptr_t result) {
  pid_t pid = (pid_t)syscall(SYS_getpid);
  if (pid != log_state.pid && !open_log(pid)) return;
  if (log_state.used + 160 > TEXT_BUFFER) compress_text(Z_NO_FLUSH);
  char* at = log_state.text + log_state.used;
  at = put_decimal(at, (uint64_t)pid);
  *at++ = ' ';
  at = put_decimal(at, (uint64_t)current_tid(pid));
  *at++ = ' ';
  at = put_text(at, name);
  *at++ = '(';
  if (arguments >= 1) at = a_pointer ? put_pointer(at, a) : put_decimal(at, a);
  if (arguments >= 2) {
    *at++ = ',';
    at = put_decimal(at, b);
  }
  *at++ = ')';
  if (has_result) {
    *at++ = '=';
    at = put_pointer(at, result);
  }
  *at++ = '\n';
  log_state.used = (size_t)(at - log_state.text);
  ++log_state.lines;
  if (name[0] != 'j') ++log_state.calls;
  check_marks();
}

// --- marks and the real allocator's figures ---------------------------------------------

static void write_mark(const char* label) {
  put_line("jemalloc_stats", 0, 0, false, 0, false, 0);
  ++log_state.mark_count;
  side_record(label);
}

// New labels in the marks file, then the every-N mark. Lock held.
static void check_marks(void) {
  static bool inside;
  if (inside) return;
  inside = true;
  if (log_state.marks != NULL) {
    uint64_t published = __atomic_load_n((const uint64_t*)log_state.marks, __ATOMIC_ACQUIRE);
    while (log_state.seen_labels < published && log_state.next_label < MARKS_FILE_SIZE) {
      const volatile char* label = (const volatile char*)log_state.marks + log_state.next_label;
      char copy[256];
      size_t n = 0;
      while (log_state.next_label + n < MARKS_FILE_SIZE && label[n] != 0 && n + 1 < sizeof copy) {
        copy[n] = label[n];
        ++n;
      }
      copy[n] = 0;
      while (log_state.next_label + n < MARKS_FILE_SIZE && label[n] != 0) ++n;
      log_state.next_label += n + 1;
      ++log_state.seen_labels;
      write_mark(copy);
    }
  }
  if (log_state.every > 0 && log_state.calls > 0 && log_state.calls % log_state.every == 0)
    write_mark("every");
  inside = false;
}

// One JSON line in the side file: the mark's number, the log's line and call counts
// there, its label, the process's command line, and the executable's
// jemalloc_stats_internal figures.
static void side_record(const char* label) {
  if (log_state.marks_fd < 0) return;
  static char json[16384];
  int n = snprintf(
      json, sizeof json,
      "{\"mark\": %llu, \"line\": %llu, \"calls\": %llu, \"label\": \"%s\", \"cmdline\": \"",
      (unsigned long long)log_state.mark_count, (unsigned long long)log_state.lines,
      (unsigned long long)log_state.calls, label);
  int cmdline = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (cmdline >= 0) {
    char arguments[512];
    ssize_t got = read(cmdline, arguments, sizeof arguments - 1);
    close(cmdline);
    for (ssize_t i = 0; i < got && n < 1200; ++i) {
      char c = arguments[i];
      json[n++] = c == 0 ? ' ' : (c == '"' || c == '\\' || c < 32) ? '?' : c;
    }
  }
  n += snprintf(json + n, sizeof json - (size_t)n, "\"");
  if (log_state.stats_usable) {
    static struct moz_stats stats;
    static struct moz_bin_stats bins[MAX_BINS];
    memset(&stats, 0, sizeof stats);
    memset(bins, 0, sizeof bins);
    log_state.stats(&stats, bins);
    n += format_stats_json(json + n, sizeof json - (size_t)n, &stats, bins, log_state.num_bins());
  } else {
    n += snprintf(json + n, sizeof json - (size_t)n,
                  ", \"stats\": null, \"why\": \"the stats layout of this Firefox is not the one "
                  "the recorder knows\"");
  }
  n += snprintf(json + n, sizeof json - (size_t)n, "}\n");
  if (n > 0 && (size_t)n < sizeof json) write_all(log_state.marks_fd, json, (size_t)n);
}

// At exit: an "exit" mark, then the gzip stream's end.
void finish_log(void) {
  pthread_mutex_lock(&log_state.lock);
  if (log_state.active && log_state.fd >= 0 && log_state.pid == (pid_t)syscall(SYS_getpid)) {
    write_mark("exit");
    compress_text(Z_FINISH);
    close(log_state.fd);
    log_state.fd = -1;
    log_state.active = false;
  }
  pthread_mutex_unlock(&log_state.lock);
}

// --- the wrappers -----------------------------------------------------------------------

typedef void* (*alloc1)(size_t);
typedef void* (*alloc2)(size_t, size_t);
typedef void* (*realloc_fn)(void*, size_t);
typedef void (*free_fn)(void*);

#define LOCK() pthread_mutex_lock(&log_state.lock)
#define UNLOCK() pthread_mutex_unlock(&log_state.lock)

static void log_alloc1(const char* name, size_t size, void* result) {
  LOCK();
  if (log_state.active) put_line(name, 1, size, false, 0, true, (uintptr_t)result);
  UNLOCK();
}

static void log_alloc2(const char* name, size_t a, size_t b, void* result) {
  LOCK();
  if (log_state.active) put_line(name, 2, a, false, b, true, (uintptr_t)result);
  UNLOCK();
}

static void log_free(void* p) {
  LOCK();
  if (log_state.active) put_line("free", 1, (uintptr_t)p, true, 0, false, 0);
  UNLOCK();
}

static void* logged_realloc(int function, void* p, size_t size) {
  LOCK();
  void* q = ((realloc_fn)real[function])(p, size);
  if (log_state.active) put_line("realloc", 2, (uintptr_t)p, true, size, true, (uintptr_t)q);
  UNLOCK();
  return q;
}

static void* w_malloc(size_t n) {
  void* p = ((alloc1)real[F_MALLOC])(n);
  log_alloc1("malloc", n, p);
  return p;
}
static void* w_xmalloc(size_t n) {
  void* p = ((alloc1)real[F_XMALLOC])(n);
  log_alloc1("malloc", n, p);
  return p;
}
static void* w_calloc(size_t count, size_t n) {
  void* p = ((alloc2)real[F_CALLOC])(count, n);
  log_alloc2("calloc", count, n, p);
  return p;
}
static void* w_xcalloc(size_t count, size_t n) {
  void* p = ((alloc2)real[F_XCALLOC])(count, n);
  log_alloc2("calloc", count, n, p);
  return p;
}
static void* w_realloc(void* p, size_t n) { return logged_realloc(F_REALLOC, p, n); }
static void* w_xrealloc(void* p, size_t n) { return logged_realloc(F_XREALLOC, p, n); }
static void w_free(void* p) {
  if (p != NULL) log_free(p);
  ((free_fn)real[F_FREE])(p);
}
static void* w_memalign(size_t alignment, size_t n) {
  void* p = ((alloc2)real[F_MEMALIGN])(alignment, n);
  log_alloc2("memalign", alignment, n, p);
  return p;
}
static void* w_xmemalign(size_t alignment, size_t n) {
  void* p = ((alloc2)real[F_XMEMALIGN])(alignment, n);
  log_alloc2("memalign", alignment, n, p);
  return p;
}
static int w_posix_memalign(void** out, size_t alignment, size_t n) {
  int failed = ((int (*)(void**, size_t, size_t))real[F_POSIX_MEMALIGN])(out, alignment, n);
  log_alloc2("posix_memalign", alignment, n, failed ? NULL : *out);
  return failed;
}
static void* w_aligned_alloc(size_t alignment, size_t n) {
  void* p = ((alloc2)real[F_ALIGNED_ALLOC])(alignment, n);
  log_alloc2("aligned_alloc", alignment, n, p);
  return p;
}
static void* w_valloc(size_t n) {
  void* p = ((alloc1)real[F_VALLOC])(n);
  log_alloc1("valloc", n, p);
  return p;
}
// The string copies allocate length + 1 bytes inside the executable: a malloc.
static char* w_strdup(const char* s) {
  char* p = ((char* (*)(const char*))real[F_STRDUP])(s);
  log_alloc1("malloc", strlen(s) + 1, p);
  return p;
}
static char* w_xstrdup(const char* s) {
  char* p = ((char* (*)(const char*))real[F_XSTRDUP])(s);
  log_alloc1("malloc", strlen(s) + 1, p);
  return p;
}
static char* w_strndup(const char* s, size_t n) {
  char* p = ((char* (*)(const char*, size_t))real[F_STRNDUP])(s, n);
  log_alloc1("malloc", strnlen(s, n) + 1, p);
  return p;
}
static char* w_xstrndup(const char* s, size_t n) {
  char* p = ((char* (*)(const char*, size_t))real[F_XSTRNDUP])(s, n);
  log_alloc1("malloc", strnlen(s, n) + 1, p);
  return p;
}
static void* w_xmemdup(const void* s, size_t n) {
  void* p = ((void* (*)(const void*, size_t))real[F_XMEMDUP])(s, n);
  log_alloc1("malloc", n, p);
  return p;
}
// Calls into other arenas: the replay has one, so they are logged as plain calls.
static void* w_arena_malloc(size_t arena, size_t n) {
  void* p = ((void* (*)(size_t, size_t))real[F_ARENA_MALLOC])(arena, n);
  log_alloc1("malloc", n, p);
  return p;
}
static void* w_arena_calloc(size_t arena, size_t count, size_t n) {
  void* p = ((void* (*)(size_t, size_t, size_t))real[F_ARENA_CALLOC])(arena, count, n);
  log_alloc2("calloc", count, n, p);
  return p;
}
static void* w_arena_realloc(size_t arena, void* p, size_t n) {
  LOCK();
  void* q = ((void* (*)(size_t, void*, size_t))real[F_ARENA_REALLOC])(arena, p, n);
  if (log_state.active) put_line("realloc", 2, (uintptr_t)p, true, n, true, (uintptr_t)q);
  UNLOCK();
  return q;
}
static void w_arena_free(size_t arena, void* p) {
  if (p != NULL) log_free(p);
  ((void (*)(size_t, void*))real[F_ARENA_FREE])(arena, p);
}
static void* w_arena_memalign(size_t arena, size_t alignment, size_t n) {
  void* p = ((void* (*)(size_t, size_t, size_t))real[F_ARENA_MEMALIGN])(arena, alignment, n);
  log_alloc2("memalign", alignment, n, p);
  return p;
}
static void w_exit(int status) {
  finish_log();
  ((void (*)(int))real[F_EXIT])(status);
  __builtin_unreachable();
}
static void w_underscore_exit(int status) {
  finish_log();
  ((void (*)(int))real[F_UNDERSCORE_EXIT])(status);
  __builtin_unreachable();
}
static void w_capital_exit(int status) {
  finish_log();
  ((void (*)(int))real[F_CAPITAL_EXIT])(status);
  __builtin_unreachable();
}
static const uintptr_t wrappers_in_order[F_COUNT] = {
    (uintptr_t)w_malloc,         (uintptr_t)w_calloc,        (uintptr_t)w_realloc,
    (uintptr_t)w_free,           (uintptr_t)w_memalign,      (uintptr_t)w_posix_memalign,
    (uintptr_t)w_aligned_alloc,  (uintptr_t)w_valloc,        (uintptr_t)w_strdup,
    (uintptr_t)w_strndup,        (uintptr_t)w_xmalloc,       (uintptr_t)w_xcalloc,
    (uintptr_t)w_xrealloc,       (uintptr_t)w_xmemalign,     (uintptr_t)w_xstrdup,
    (uintptr_t)w_xstrndup,       (uintptr_t)w_xmemdup,       (uintptr_t)w_arena_malloc,
    (uintptr_t)w_arena_calloc,   (uintptr_t)w_arena_realloc, (uintptr_t)w_arena_free,
    (uintptr_t)w_arena_memalign, (uintptr_t)w_exit,          (uintptr_t)w_underscore_exit,
    (uintptr_t)w_capital_exit,
};

// --- process set-up ----------------------------------------------------------------------

void start_recording(uintptr_t (*lookup)(const char* name)) {
  const char* directory = getenv("RUNSEL_FIREFOX_LOG_DIR");
  if (directory == NULL || directory[0] == 0) {
    say("RUNSEL_FIREFOX_LOG_DIR is not set; nothing is recorded");
    return;
  }
  snprintf(log_state.directory, sizeof log_state.directory, "%s", directory);
  const char* every = getenv("RUNSEL_FIREFOX_EVERY");
  log_state.every = every ? strtoull(every, NULL, 10) : 1000000;
  for (int i = 0; i < F_COUNT; ++i) {
    wrapper[i] = wrappers_in_order[i];
    if (i < FIRST_EXIT) real[i] = lookup(function_names[i]);
  }
  log_state.stats = (jemalloc_stats_fn)lookup("jemalloc_stats_internal");
  log_state.num_bins = (num_bins_fn)lookup("jemalloc_stats_num_bins");
  const char* marks = getenv("RUNSEL_FIREFOX_MARKS");
  if (marks != NULL && marks[0] != 0) {
    int fd = open(marks, O_RDONLY | O_CLOEXEC);
    void* mapped = fd < 0 ? MAP_FAILED : mmap(NULL, MARKS_FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    if (mapped == MAP_FAILED)
      say("cannot map RUNSEL_FIREFOX_MARKS; no tab marks in this process");
    else
      log_state.marks = mapped;
    log_state.next_label = 64;
  }
  log_state.active = true;
}

// Called once the executable's allocator can run (its relocations are done).
void check_stats_layout(void) {
  if (log_state.stats == NULL || log_state.num_bins == NULL) {
    say("this Firefox exports no jemalloc_stats_internal: recording without its figures");
    return;
  }
  static struct moz_stats stats;
  static struct moz_bin_stats bins[MAX_BINS];
  size_t count = log_state.num_bins();
  if (count > 0 && count <= MAX_BINS) log_state.stats(&stats, bins);
  log_state.stats_usable = stats_layout_matches(&stats, count);
  if (!log_state.stats_usable)
    say("this Firefox's jemalloc_stats layout is not the known one (quantum 16, chunk 1 MiB, "
        "page 4 KiB): recording without its figures");
}

bool recording(void) { return log_state.active; }

// A process that returns from main or calls exit() through the executable.
__attribute__((destructor)) static void at_unload(void) { finish_log(); }
