// runsel-trace-convert: Mozilla logalloc text logs to runsel traces and back
// (tools/trace/format.md, "Firefox's logalloc logs").
//
//   runsel-trace-convert from-logalloc [--pid N] [--partial] LOG TRACE
//       LOG (plain or gzip-compressed) -> the runsel trace of one of its
//       processes: --pid N, or by default the one with the most calls. Every
//       jemalloc_stats() line becomes a mark. Prints each process it saw.
//       --partial: the log of a killed program, cut anywhere (mid-line, or its
//       gzip stream cut short): its complete lines are converted, a last line
//       without its newline is dropped, and the output says how much was used.
//   runsel-trace-convert to-logalloc TRACE LOG
//       a runsel trace -> a logalloc log (gzip-compressed when LOG ends in .gz).
//
// Exit codes: 0 converted; 1 cannot read or write a file; 2 usage, a malformed
// line (its number on stderr; a line longer than any logalloc line, its number and
// byte offset, read no further), a gzip file gzip cannot decompress, a malformed
// trace (its byte offset) or no such pid. Every message is one line.
// Not linked with runsel: this program allocates as it likes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "logalloc.h"
#include "trace_format.h"

namespace {

using namespace runsel::trace;

int usage() {
  std::fprintf(stderr,
               "usage: runsel-trace-convert from-logalloc [--pid N] [--partial] LOG TRACE\n"
               "       runsel-trace-convert to-logalloc TRACE LOG\n"
               "LOG is a Mozilla logalloc log, plain or gzip-compressed (to-logalloc: "
               "compressed when it ends in .gz).\n");
  return 2;
}

// Whether the file starts with these bytes.
bool starts_with(const char* path, const void* magic, std::size_t length) {
  unsigned char first[8] = {};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || length > sizeof first) return false;
  bool same = read(fd, first, length) == static_cast<ssize_t>(length) &&
              std::memcmp(first, magic, length) == 0;
  close(fd);
  return same;
}

// A stream through `gzip` (decompressing path, or compressing into path): the
// system's gzip program, so no compression library is needed. gzip's own
// messages are dropped: finish() tells whether it failed, the caller says so.
struct GzipPipe {
  FILE* stream = nullptr;
  pid_t child = -1;

  bool open(const char* path, bool compress) {
    int ends[2];
    if (pipe(ends) != 0) return false;
    child = fork();
    if (child < 0) return false;
    if (child == 0) {
      if (compress) {
        int out = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0) _exit(126);
        dup2(ends[0], 0);
        dup2(out, 1);
      } else {
        dup2(ends[1], 1);
      }
      ::close(ends[0]);
      ::close(ends[1]);
      int quiet = ::open("/dev/null", O_WRONLY);
      if (quiet >= 0) dup2(quiet, 2);
      // A reader that stops early (a malformed line) must end gzip by SIGPIPE,
      // not by an exit code that reads as a corrupt file.
      signal(SIGPIPE, SIG_DFL);
      if (compress)
        execlp("gzip", "gzip", "-c", static_cast<char*>(nullptr));
      else
        execlp("gzip", "gzip", "-dc", "--", path, static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(compress ? ends[0] : ends[1]);
    stream = fdopen(compress ? ends[1] : ends[0], compress ? "w" : "r");
    return stream != nullptr;
  }

  // gzip's wait status (-1 if it could not be had).
  int finish() {
    if (stream) std::fclose(stream);
    int status = -1;
    if (child <= 0 || waitpid(child, &status, 0) != child) return -1;
    return status;
  }
};

bool exited_zero(int status) {
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// How reading a log went, beyond what the parser made of its lines.
struct LogReading {
  std::uint64_t used_bytes = 0, cut_bytes = 0;
  bool unterminated = false;  // the last line read has no newline
  bool read_error = false;
  bool gzip_cut = false;  // gzip exited non-zero: not gzip data, or cut short
};

// Opens the log to read: through gzip when it is compressed. 0, or the exit code
// (its message said).
int open_log(const char* log, bool gzip, GzipPipe& pipe, FILE*& in) {
  if (gzip) {
    if (!pipe.open(log, false)) {
      std::fprintf(stderr, "runsel-trace-convert: cannot run gzip: %s\n", std::strerror(errno));
      return 1;
    }
    in = pipe.stream;
  } else {
    in = std::fopen(log, "r");
    if (in == nullptr) {
      std::fprintf(stderr, "runsel-trace-convert: %s: %s\n", log, std::strerror(errno));
      return 1;
    }
  }
  return 0;
}

// The lines of a log, one at a time, none held beyond kMaxLogallocLine bytes: a
// line of any length costs no more memory than that.
class LineReader {
 public:
  explicit LineReader(FILE* in) : in_(in) { line_.reserve(kMaxLogallocLine); }

  enum class Got { line, too_long, end };
  // The next line: its bytes without the newline (text(), length()), whether a newline
  // ended it (terminated()) and where it starts in the text (offset()). too_long: more
  // than kMaxLogallocLine bytes before its newline or the end; text() holds the first
  // kMaxLogallocLine and the rest is unread (skip_rest()).
  Got next() {
    line_.clear();
    terminated_ = false;
    offset_ = consumed_;
    for (;;) {
      if (begin_ == end_ && !fill()) return line_.empty() ? Got::end : Got::line;
      const char* start = buffer_ + begin_;
      std::size_t available = end_ - begin_;
      const void* newline = std::memchr(start, '\n', available);
      std::size_t take =
          newline ? static_cast<std::size_t>(static_cast<const char*>(newline) - start) : available;
      if (line_.size() + take > kMaxLogallocLine) {
        take = kMaxLogallocLine - line_.size();
        line_.append(start, take);
        advance(take);
        return Got::too_long;
      }
      line_.append(start, take);
      advance(take);
      if (newline) {
        advance(1);
        terminated_ = true;
        return Got::line;
      }
    }
  }

  // After too_long: reads to the end of that line, keeping none of it. Whether a
  // newline ended it; `skipped`: the bytes passed over, the newline not counted.
  bool skip_rest(std::uint64_t& skipped) {
    skipped = 0;
    for (;;) {
      if (begin_ == end_ && !fill()) return false;
      const char* start = buffer_ + begin_;
      std::size_t available = end_ - begin_;
      const void* newline = std::memchr(start, '\n', available);
      std::size_t take =
          newline ? static_cast<std::size_t>(static_cast<const char*>(newline) - start) : available;
      skipped += take;
      advance(take);
      if (newline) {
        advance(1);
        return true;
      }
    }
  }

  const char* text() const { return line_.data(); }
  std::size_t length() const { return line_.size(); }
  bool terminated() const { return terminated_; }
  std::uint64_t offset() const { return offset_; }

 private:
  bool fill() {
    std::size_t n = std::fread(buffer_, 1, sizeof buffer_, in_);
    begin_ = 0;
    end_ = n;
    return n > 0;
  }
  void advance(std::size_t bytes) {
    begin_ += bytes;
    consumed_ += bytes;
  }

  FILE* in_;
  char buffer_[1 << 16];
  std::size_t begin_ = 0, end_ = 0;
  std::string line_;
  bool terminated_ = false;
  std::uint64_t offset_ = 0, consumed_ = 0;
};

// Gives the parser each line of in, up to the first malformed one (--partial: up to
// a last line without its newline, which is dropped). A line longer than any logalloc
// line is malformed wherever it is, and the log is read no further (--partial: unless
// it is that cut last line, read to its end without being held).
void parse_lines(FILE* in, bool partial, LogallocParser& parser, LogReading& reading) {
  LineReader lines(in);
  for (LineReader::Got got; (got = lines.next()) != LineReader::Got::end;) {
    if (got == LineReader::Got::too_long) {
      std::uint64_t rest = 0;
      if (partial && !lines.skip_rest(rest)) {  // the cut: dropped, however long
        reading.unterminated = true;
        reading.cut_bytes = lines.length() + rest;
        break;
      }
      reading.unterminated = false;
      parser.too_long(lines.text(), lines.length(), lines.offset());
      break;
    }
    reading.unterminated = !lines.terminated();
    if (partial && !lines.terminated()) {  // the cut: whatever it says, it is not a whole call
      reading.cut_bytes = lines.length();
      break;
    }
    reading.used_bytes += lines.length() + (lines.terminated() ? 1 : 0);
    if (!parser.line(lines.text(), lines.length())) break;
  }
  reading.read_error = std::ferror(in) != 0;
}

// Reads and parses the whole log. 0, or the exit code (its message said) when the
// log cannot be read, gzip fails on it or a line is malformed.
int read_log(const char* log, bool gzip, bool partial, LogallocParser& parser,
             LogReading& reading) {
  GzipPipe pipe;
  FILE* in = nullptr;
  if (int failed = open_log(log, gzip, pipe, in)) return failed;
  parse_lines(in, partial, parser, reading);
  int gzip_status = gzip ? pipe.finish() : (std::fclose(in), 0);
  // gzip exiting non-zero: the file is not gzip data or is cut short, whatever the
  // parser made of what came out (killed by SIGPIPE: the parser stopped reading).
  reading.gzip_cut =
      gzip && gzip_status != -1 && WIFEXITED(gzip_status) && WEXITSTATUS(gzip_status) != 0;
  if (reading.gzip_cut && partial && !parser.failed() && parser.lines() > 0) {
    gzip_status = 0;  // a killed program's log: its stream ends early
  } else if (reading.gzip_cut) {
    std::fprintf(stderr,
                 "runsel-trace-convert: %s: gzip could not decompress it (corrupt, or cut "
                 "short: --partial)\n",
                 log);
    return 2;
  }
  if (parser.failed()) {
    // A first line without the shape of a logalloc line: the file is no log at all.
    if (parser.not_a_log())
      std::fprintf(stderr, "runsel-trace-convert: %s: not a runsel trace or a logalloc log (%s)\n",
                   log, parser.error().c_str());
    else
      std::fprintf(
          stderr, "runsel-trace-convert: %s: malformed logalloc log at %s%s\n", log,
          parser.error().c_str(),
          reading.unterminated ? " (the last line, without its newline: cut? --partial)" : "");
    return 2;
  }
  if (reading.read_error || (gzip && !exited_zero(gzip_status))) {
    std::fprintf(stderr, "runsel-trace-convert: %s: %s\n", log,
                 gzip ? "gzip could not be run to the end" : "read error");
    return 1;
  }
  return 0;
}

// Writes the trace file of one process. 0, or 1 when it cannot be written.
int write_trace(const char* out, const ProcessTrace& process) {
  std::vector<std::uint8_t> bytes = process.file();
  FILE* trace = std::fopen(out, "wb");
  bool written =
      trace != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), trace) == bytes.size();
  if (trace == nullptr || std::fclose(trace) != 0 || !written) {
    std::fprintf(stderr, "runsel-trace-convert: %s: %s\n", out, std::strerror(errno));
    return 1;
  }
  std::printf("wrote %s: %zu bytes, %" PRIu64 " records of pid %" PRIu64 "\n", out, bytes.size(),
              process.count, process.pid);
  return 0;
}

int from_logalloc(const char* log, const char* out, bool has_pid, std::uint64_t wanted,
                  bool partial) {
  if (starts_with(log, kMagic, sizeof kMagic)) {
    std::fprintf(stderr, "runsel-trace-convert: %s: a runsel trace already: nothing to convert\n",
                 log);
    return 2;
  }
  const unsigned char gzip_magic[2] = {0x1f, 0x8b};
  bool gzip = starts_with(log, gzip_magic, sizeof gzip_magic);
  LogallocParser parser;
  LogReading reading;
  if (int failed = read_log(log, gzip, partial, parser, reading)) return failed;
  if (!partial && reading.unterminated)
    std::printf(
        "note: the last line has no newline: if the program was killed it may be cut "
        "(--partial drops it)\n");
  if (partial)
    std::printf("partial: used %" PRIu64 " complete lines (%" PRIu64 " bytes of text)%s%s\n",
                parser.lines(), reading.used_bytes,
                reading.cut_bytes ? ", dropped the cut last line" : ", no line was cut",
                reading.gzip_cut ? "; the gzip stream ends early (cut short)" : "");
  const ProcessTrace* chosen = parser.largest();
  if (has_pid) {
    auto found = parser.processes().find(wanted);
    chosen = found == parser.processes().end() ? nullptr : &found->second;
  }
  for (const auto& [pid, process] : parser.processes())
    std::printf("pid %" PRIu64 ": %" PRIu64 " calls, %" PRIu64 " jemalloc_stats, %zu threads%s\n",
                pid, process.count - process.marks, process.marks, process.threads.size(),
                &process == chosen ? " (converted)" : "");
  if (chosen == nullptr) {
    if (has_pid)
      std::fprintf(stderr, "runsel-trace-convert: %s: no process %" PRIu64 " in the log\n", log,
                   wanted);
    else
      std::fprintf(stderr, "runsel-trace-convert: %s: no calls in the log\n", log);
    return 2;
  }
  return write_trace(out, *chosen);
}

int to_logalloc(const char* path, const char* out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0) {
    std::fprintf(stderr, "runsel-trace-convert: %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  std::size_t size = static_cast<std::size_t>(info.st_size);
  void* mapped = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  close(fd);
  if (mapped == MAP_FAILED) {
    std::fprintf(stderr, "runsel-trace-convert: %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  const auto* data = static_cast<const std::uint8_t*>(mapped);
  Header header;
  Record record;
  Reader check(data, size);  // validate first: a bad trace writes nothing
  if (check.read_header(header))
    while (check.next(record)) {
    }
  if (check.failed()) {
    std::fprintf(stderr, "runsel-trace-convert: %s: malformed trace at byte offset %zu: %s\n", path,
                 check.problem().offset, check.problem().what);
    return 2;
  }
  std::size_t length = std::strlen(out);
  bool compress = length > 3 && std::strcmp(out + length - 3, ".gz") == 0;
  GzipPipe pipe;
  FILE* log = nullptr;
  if (compress ? pipe.open(out, true) : (log = std::fopen(out, "w")) != nullptr) {
    if (compress) log = pipe.stream;
  } else {
    std::fprintf(stderr, "runsel-trace-convert: %s: %s\n", out, std::strerror(errno));
    return 1;
  }
  Reader reader(data, size);
  reader.read_header(header);
  char line[256];
  std::uint64_t lines = 0;
  while (reader.next(record)) {
    int n = logalloc_line(line, sizeof line, header.pid, record);
    std::fwrite(line, 1, static_cast<std::size_t>(n), log);
    ++lines;
  }
  bool ok = std::ferror(log) == 0;
  ok = compress ? exited_zero(pipe.finish()) && ok : std::fclose(log) == 0 && ok;
  if (!ok) {
    std::fprintf(stderr, "runsel-trace-convert: %s: write failed\n", out);
    return 1;
  }
  std::printf("wrote %s: %" PRIu64 " lines of pid %" PRIu64 "\n", out, lines, header.pid);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string mode = argv[1];
  if (mode == "to-logalloc" && argc == 4) return to_logalloc(argv[2], argv[3]);
  if (mode != "from-logalloc") return usage();
  bool has_pid = false, partial = false;
  std::uint64_t pid = 0;
  int i = 2;
  for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; ++i) {
    if (std::strcmp(argv[i], "--partial") == 0) {
      partial = true;
    } else if (std::strcmp(argv[i], "--pid") == 0 && i + 1 < argc) {
      char* end = nullptr;
      pid = std::strtoull(argv[i + 1], &end, 10);
      if (*end != 0 || argv[i + 1][0] == 0) return usage();
      has_pid = true;
      ++i;
    } else {
      return usage();
    }
  }
  if (argc - i != 2) return usage();
  return from_logalloc(argv[i], argv[i + 1], has_pid, pid, partial);
}
