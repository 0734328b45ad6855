// Mozilla's logalloc text logs, both ways (format.md, "Firefox's logalloc logs"):
// LogallocParser turns the lines of a log into one runsel trace per process,
// rejecting a malformed line with its number; logalloc_line() writes one record
// of a runsel trace as a line of such a log. Used by runsel-trace-convert, which
// is not linked with runsel, so this header may allocate.
#ifndef RUNSEL_TRACE_LOGALLOC_H
#define RUNSEL_TRACE_LOGALLOC_H

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace_format.h"

namespace runsel::trace {

// One process's calls, encoded as the records of a runsel trace.
struct ProcessTrace {
  std::uint64_t pid = 0;
  std::vector<std::uint8_t> records;  // encoded, without header and end record
  std::uint64_t count = 0;
  std::uint64_t marks = 0;
  std::uint64_t null_frees = 0;  // free(0x0): logged by logalloc, not a runsel record
  PointerCoder pointers;
  std::unordered_map<std::uint64_t, std::uint32_t> threads;  // logged tid -> 0, 1, ...

  // The whole trace file: header, records, end record.
  std::vector<std::uint8_t> file() const {
    std::vector<std::uint8_t> bytes(16 + kMaxVarint);
    bytes.resize(static_cast<std::size_t>(put_header(bytes.data(), 0, pid) - bytes.data()));
    bytes.insert(bytes.end(), records.begin(), records.end());
    std::size_t at = bytes.size();
    bytes.resize(at + kEndRecord);
    put_end(bytes.data() + at, count);
    return bytes;
  }
};

// The longest line a log may have, without its newline: logalloc's longest call,
// posix_memalign with 20-digit numbers and a 16-digit pointer, is about 130 bytes. A
// longer line is refused by its number and byte offset, and a reader need hold no
// more of it than this.
inline constexpr std::size_t kMaxLogallocLine = 4096;

class LogallocParser {
 public:
  // Parses one line (without its newline). False on a malformed line: error()
  // says why, with the line number; the parser then stays failed.
  bool line(const char* text, std::size_t length) {
    ++number_;
    if (failed()) return false;
    if (length > 0 && text[length - 1] == '\r') --length;
    at_ = start_ = text;
    end_ = text + length;
    reached_call_ = false;
    Call call;
    if (!parse_call(call)) return false;
    add_record(call);
    return true;
  }

  // A line longer than kMaxLogallocLine, given by its first bytes (`length`, at most
  // that), starting at byte `offset` of the log's text: fails the parser with its
  // number and offset. Whether its start looks like a logalloc line still decides
  // not_a_log().
  void too_long(const char* text, std::size_t length, std::uint64_t offset) {
    ++number_;
    if (failed()) return;
    at_ = start_ = text;
    end_ = text + length;
    reached_call_ = false;
    Call call;
    parse_call(call);  // only for reached_call_: the prefix ends before the line does
    error_ = "line " + std::to_string(number_) + " (byte offset " + std::to_string(offset) +
             "): longer than " + std::to_string(kMaxLogallocLine) +
             " bytes, which no logalloc line is: " + quote();
  }

  bool failed() const { return !error_.empty(); }
  // Failed on the first line before its "<pid> <tid> <function>(": no log at all.
  bool not_a_log() const { return failed() && number_ == 1 && !reached_call_; }
  const std::string& error() const { return error_; }
  std::uint64_t lines() const { return number_; }
  const std::map<std::uint64_t, ProcessTrace>& processes() const { return processes_; }

  // The process with the most records (the lowest pid among equals), or nullptr.
  const ProcessTrace* largest() const {
    const ProcessTrace* best = nullptr;
    for (const auto& [pid, process] : processes_)
      if (best == nullptr || process.count > best->count) best = &process;
    return best;
  }

 private:
  struct Shape {
    const char* name;
    Op op;
    int arguments;
    bool pointer_first;  // the first argument is a pointer (realloc, free)
    bool result;         // "=<pointer>" follows
  };

  static const Shape* shape_of(const std::string& function) {
    static const Shape shapes[] = {
        {"malloc", Op::malloc, 1, false, true},
        {"calloc", Op::calloc, 2, false, true},
        {"realloc", Op::realloc, 2, true, true},
        {"free", Op::free, 1, true, false},
        {"memalign", Op::memalign, 2, false, true},
        {"posix_memalign", Op::posix_memalign, 2, false, true},
        {"aligned_alloc", Op::aligned_alloc, 2, false, true},
        {"valloc", Op::valloc, 1, false, true},
        {"jemalloc_stats", Op::mark, 0, false, false},
    };
    for (const Shape& shape : shapes)
      if (function == shape.name) return &shape;
    return nullptr;
  }

  // One line's call, as written: "<pid> <tid> <function>(<arguments>)[=<result>]".
  struct Call {
    std::uint64_t pid = 0, tid = 0;
    const Shape* shape = nullptr;
    std::uint64_t args[2] = {0, 0};
    std::uint64_t result = 0;
  };

  // Reads the line's call from at_ to end_. False on malformed text (fail() said).
  bool parse_call(Call& call) {
    if (!number(call.pid, "a process id")) return false;
    if (!spaces()) return false;
    if (!number(call.tid, "a thread id")) return false;
    if (!spaces()) return false;
    const char* name = at_;
    while (at_ < end_ && (std::islower(static_cast<unsigned char>(*at_)) || *at_ == '_')) ++at_;
    std::string function(name, static_cast<std::size_t>(at_ - name));
    if (at_ == end_ || *at_ != '(') return fail("expected '(' after the function name");
    ++at_;
    reached_call_ = true;

    call.shape = shape_of(function);
    if (call.shape == nullptr) return fail(("unknown function '" + function + "'").c_str());
    for (int i = 0; i < call.shape->arguments; ++i) {
      if (i > 0 && !expect(',')) return false;
      bool pointer = i == 0 && call.shape->pointer_first;
      if (!(pointer ? this->pointer(call.args[i]) : number(call.args[i], "a number"))) return false;
    }
    if (!expect(')')) return false;
    if (call.shape->result) {
      if (!expect('=')) return false;
      if (!pointer(call.result)) return false;
    }
    if (at_ != end_) return fail("unexpected text at the end of the line");
    return true;
  }

  // Appends the call to its process's trace as a record (free(0x0) is only counted;
  // jemalloc_stats() becomes a mark labelled with its line number).
  void add_record(const Call& call) {
    ProcessTrace& process = processes_[call.pid];
    process.pid = call.pid;
    auto thread =
        process.threads.emplace(call.tid, static_cast<std::uint32_t>(process.threads.size()));
    Record r;
    r.op = call.shape->op;
    r.thread = thread.first->second;
    std::string label;
    switch (call.shape->op) {
      case Op::malloc:
      case Op::valloc:
        r.size = call.args[0];
        break;
      case Op::calloc:
        r.count = call.args[0];
        r.size = call.args[1];
        break;
      case Op::realloc:
        r.input = call.args[0];
        r.size = call.args[1];
        break;
      case Op::free:
        if (call.args[0] == 0) {
          ++process.null_frees;
          return;
        }
        r.input = call.args[0];
        break;
      case Op::posix_memalign:
      case Op::aligned_alloc:
      case Op::memalign:
        r.alignment = call.args[0];
        r.size = call.args[1];
        break;
      case Op::mark:
        label = "jemalloc_stats #" + std::to_string(process.marks + 1) + " (line " +
                std::to_string(number_) + ")";
        r.label = label.data();
        r.label_length = static_cast<std::uint32_t>(label.size());
        ++process.marks;
        break;
      default:
        break;
    }
    r.result = call.result;
    std::size_t at = process.records.size();
    process.records.resize(at + kMaxMarkRecord);
    std::uint8_t* out = put_record(process.records.data() + at, r, process.pointers);
    process.records.resize(static_cast<std::size_t>(out - process.records.data()));
    ++process.count;
  }

  // "line N, column C: what: the line" (its first 120 bytes, each byte outside
  // printable ASCII as \xNN, so the message is one line of text whatever the log holds).
  bool fail(const char* what) {
    error_ = "line " + std::to_string(number_) + ", column " + std::to_string(at_ - start_ + 1) +
             ": " + what + ": " + quote();
    return false;
  }

  // The line being parsed, its first 120 bytes, as one line of printable text.
  std::string quote() const {
    std::size_t length = static_cast<std::size_t>(end_ - start_);
    std::string quoted;
    for (const char* c = start_; c < start_ + (length < 120 ? length : 120); ++c) {
      auto byte = static_cast<unsigned char>(*c);
      if (byte >= 0x20 && byte <= 0x7E && byte != '\\') {
        quoted += *c;
      } else {
        char escaped[5];
        std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
        quoted += escaped;
      }
    }
    return quoted;
  }

  bool spaces() {
    if (at_ == end_ || *at_ != ' ') return fail("expected a space");
    while (at_ < end_ && *at_ == ' ') ++at_;
    return true;
  }

  bool expect(char c) {
    if (at_ < end_ && *at_ == c) {
      ++at_;
      return true;
    }
    char what[40];
    std::snprintf(what, sizeof what, "expected '%c'", c);
    return fail(what);
  }

  bool number(std::uint64_t& value, const char* what) {
    value = 0;
    const char* start = at_;
    for (; at_ < end_ && *at_ >= '0' && *at_ <= '9'; ++at_) {
      std::uint64_t digit = static_cast<std::uint64_t>(*at_ - '0');
      if (value > (UINT64_MAX - digit) / 10) return fail("number out of range");
      value = value * 10 + digit;
    }
    if (at_ == start) return fail((std::string("expected ") + what).c_str());
    return true;
  }

  // "0x" and hexadecimal digits (logalloc's %p; 0x0 is NULL), or "(nil)".
  bool pointer(std::uint64_t& value) {
    value = 0;
    if (end_ - at_ >= 5 && std::memcmp(at_, "(nil)", 5) == 0) {
      at_ += 5;
      return true;
    }
    if (end_ - at_ < 3 || at_[0] != '0' || (at_[1] != 'x' && at_[1] != 'X'))
      return fail("expected a pointer (0x...)");
    at_ += 2;
    int digits = 0;
    for (; at_ < end_ && std::isxdigit(static_cast<unsigned char>(*at_)); ++at_, ++digits) {
      if (digits == 16) return fail("pointer out of range");
      char c = static_cast<char>(std::tolower(static_cast<unsigned char>(*at_)));
      value = value << 4 | static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (digits == 0) return fail("expected a pointer (0x...)");
    return true;
  }

  std::map<std::uint64_t, ProcessTrace> processes_;
  std::uint64_t number_ = 0;
  std::string error_;
  const char* start_ = nullptr;  // the line being parsed
  const char* at_ = nullptr;
  const char* end_ = nullptr;
  bool reached_call_ = false;  // the line got as far as "<pid> <tid> <function>("
};

// One record as a logalloc line (with its newline) into out (256 bytes suffice);
// returns its length. Calls logalloc does not log become the nearest it does:
// reallocarray(p, n, s) is realloc(p, n * s) (SIZE_MAX when that overflows, which
// fails the same way) and pvalloc(s) is valloc(s rounded up to 4096); a mark is
// jemalloc_stats(), its label lost.
inline int logalloc_line(char* out, std::size_t room, std::uint64_t pid, const Record& r) {
  auto p = [](std::uint64_t address) { return static_cast<unsigned long long>(address); };
  unsigned long long thread = r.thread, size = r.size;
  unsigned long long id = pid;
  switch (r.op) {
    case Op::malloc:
      return std::snprintf(out, room, "%llu %llu malloc(%llu)=0x%llx\n", id, thread, size,
                           p(r.result));
    case Op::calloc:
      return std::snprintf(out, room, "%llu %llu calloc(%llu,%llu)=0x%llx\n", id, thread,
                           static_cast<unsigned long long>(r.count), size, p(r.result));
    case Op::realloc:
    case Op::reallocarray: {
      std::uint64_t bytes = r.size;
      if (r.op == Op::reallocarray && __builtin_mul_overflow(r.count, r.size, &bytes))
        bytes = UINT64_MAX;
      return std::snprintf(out, room, "%llu %llu realloc(0x%llx,%llu)=0x%llx\n", id, thread,
                           p(r.input), static_cast<unsigned long long>(bytes), p(r.result));
    }
    case Op::free:
      return std::snprintf(out, room, "%llu %llu free(0x%llx)\n", id, thread, p(r.input));
    case Op::posix_memalign:
    case Op::aligned_alloc:
    case Op::memalign:
      return std::snprintf(out, room, "%llu %llu %s(%llu,%llu)=0x%llx\n", id, thread, op_name(r.op),
                           static_cast<unsigned long long>(r.alignment), size, p(r.result));
    case Op::valloc:
    case Op::pvalloc: {
      std::uint64_t bytes = r.size;
      if (r.op == Op::pvalloc) bytes = (r.size + 4095) & ~std::uint64_t{4095};
      return std::snprintf(out, room, "%llu %llu valloc(%llu)=0x%llx\n", id, thread,
                           static_cast<unsigned long long>(bytes), p(r.result));
    }
    case Op::mark:
      return std::snprintf(out, room, "%llu %llu jemalloc_stats()\n", id, thread);
  }
  return 0;
}

}  // namespace runsel::trace

#endif
