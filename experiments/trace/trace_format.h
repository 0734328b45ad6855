// runsel trace format (see format.md): the encoder the recorder uses and the
// validating reader the replayer and tests use. Header-only; allocates nothing,
// so the recorder can include it from inside malloc.
#ifndef RUNSEL_TRACE_FORMAT_H
#define RUNSEL_TRACE_FORMAT_H

#include <cstddef>
#include <cstdint>

namespace runsel::trace {

inline constexpr std::uint8_t kMagic[4] = {'R', 'S', 'T', 'R'};
// Version 2 added the mark record (op 11); the reader takes both versions.
inline constexpr std::uint8_t kVersion = 2;
inline constexpr std::uint8_t kOldestVersion = 1;
inline constexpr std::uint8_t kFlagForkedChild = 1;  // the only defined flag
inline constexpr std::uint8_t kKnownFlags = kFlagForkedChild;
inline constexpr std::size_t kMaxVarint = 10;  // bytes of a 64-bit varint
// op byte + thread varint + four 64-bit fields: no record is longer.
inline constexpr std::size_t kMaxRecord = 1 + 5 * kMaxVarint;
// The end record closes every complete trace: its head byte, then the number
// of records before it as 8 little-endian bytes (fixed size, so the recorder
// can rewrite it in place when calls follow its exit flush).
inline constexpr std::uint8_t kEndHead = 0x0F;
inline constexpr std::size_t kEndRecord = 9;
// A mark's label: 1 to kMaxLabel bytes of printable ASCII (0x20 to 0x7E), so it
// prints, quotes and goes into a text log as it is.
inline constexpr std::size_t kMaxLabel = 255;
// A mark record: head, thread varint, length varint (2 bytes), label.
inline constexpr std::size_t kMaxMarkRecord = 1 + kMaxVarint + 2 + kMaxLabel;

enum class Op : std::uint8_t {
  malloc = 1,
  calloc,
  realloc,
  free,
  posix_memalign,
  aligned_alloc,
  memalign,
  valloc,
  pvalloc,
  reallocarray,
  mark,  // a checkpoint with a label (version 2)
};
inline constexpr std::uint8_t kLastCall = static_cast<std::uint8_t>(Op::reallocarray);
inline constexpr std::uint8_t kLastOp = static_cast<std::uint8_t>(Op::mark);

inline const char* op_name(Op op) {
  static const char* const names[] = {"?",      "malloc",         "calloc",        "realloc",
                                      "free",   "posix_memalign", "aligned_alloc", "memalign",
                                      "valloc", "pvalloc",        "reallocarray",  "mark"};
  auto index = static_cast<std::uint8_t>(op);
  return index <= kLastOp ? names[index] : "?";
}

// One call. Which fields an op uses is in format.md; unused fields are 0.
// Pointers are the addresses the traced program saw (0 for NULL).
struct Record {
  Op op = Op::malloc;
  std::uint32_t thread = 0;
  std::uint64_t size = 0;       // bytes; per element for calloc/reallocarray
  std::uint64_t count = 0;      // calloc/reallocarray element count
  std::uint64_t alignment = 0;  // posix_memalign/aligned_alloc/memalign
  std::uint64_t input = 0;      // realloc/reallocarray/free argument
  std::uint64_t result = 0;     // returned pointer (posix_memalign: *memptr)
  const char* label = nullptr;  // mark: label_length bytes, not NUL-terminated
  std::uint32_t label_length = 0;
};

inline bool has_input(Op op) {
  return op == Op::realloc || op == Op::reallocarray || op == Op::free;
}
inline bool has_result(Op op) { return op != Op::free && op != Op::mark; }
inline bool has_alignment(Op op) {
  return op == Op::posix_memalign || op == Op::aligned_alloc || op == Op::memalign;
}
inline bool has_count(Op op) { return op == Op::calloc || op == Op::reallocarray; }
inline bool has_size(Op op) { return op != Op::free && op != Op::mark; }

// A byte a label may hold: printable ASCII.
inline bool label_byte(std::uint8_t byte) { return byte >= 0x20 && byte < 0x7F; }

// --- encoding ----------------------------------------------------------------

inline std::uint8_t* put_varint(std::uint8_t* out, std::uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<std::uint8_t>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<std::uint8_t>(value);
  return out;
}

// Pointers are written as a delta from the previous pointer field of the
// stream: 0 is NULL, otherwise zigzag(address - previous) + 1.
struct PointerCoder {
  std::uint64_t previous = 0;

  std::uint64_t encode(std::uint64_t address) {
    if (address == 0) return 0;
    auto delta = static_cast<std::int64_t>(address - previous);
    previous = address;
    return ((static_cast<std::uint64_t>(delta) << 1) ^ static_cast<std::uint64_t>(delta >> 63)) + 1;
  }
  std::uint64_t decode(std::uint64_t code) {
    if (code == 0) return 0;
    std::uint64_t zigzag = code - 1;
    std::uint64_t delta = (zigzag >> 1) ^ (~(zigzag & 1) + 1);
    previous += delta;
    return previous;
  }
};

// Header: magic, version, flags, pid (varint). Returns the end.
inline std::uint8_t* put_header(std::uint8_t* out, std::uint8_t flags, std::uint64_t pid) {
  for (std::uint8_t byte : kMagic) *out++ = byte;
  *out++ = kVersion;
  *out++ = flags;
  return put_varint(out, pid);
}

// Appends one record (at most kMaxRecord bytes); returns the end.
inline std::uint8_t* put_record(std::uint8_t* out, const Record& r, PointerCoder& pointers) {
  auto op = static_cast<std::uint8_t>(r.op);
  if (r.thread < 15) {
    *out++ = static_cast<std::uint8_t>(op | (r.thread << 4));
  } else {
    *out++ = static_cast<std::uint8_t>(op | 0xF0);
    out = put_varint(out, r.thread);
  }
  if (has_input(r.op)) out = put_varint(out, pointers.encode(r.input));
  if (has_alignment(r.op)) out = put_varint(out, r.alignment);
  if (has_count(r.op)) out = put_varint(out, r.count);
  if (has_size(r.op)) out = put_varint(out, r.size);
  if (has_result(r.op)) out = put_varint(out, pointers.encode(r.result));
  if (r.op == Op::mark) {  // the caller keeps labels valid (label_byte, 1..kMaxLabel)
    out = put_varint(out, r.label_length);
    for (std::uint32_t i = 0; i < r.label_length; ++i)
      *out++ = static_cast<std::uint8_t>(r.label[i]);
  }
  return out;
}

inline std::uint8_t* put_end(std::uint8_t* out, std::uint64_t records) {
  *out++ = kEndHead;
  for (int i = 0; i < 8; ++i) *out++ = static_cast<std::uint8_t>(records >> (8 * i));
  return out;
}

// --- decoding ----------------------------------------------------------------

struct Header {
  std::uint8_t version = 0;
  std::uint8_t flags = 0;
  std::uint64_t pid = 0;
};

// The first problem found: where it starts and what it is (a static string).
struct Problem {
  std::size_t offset = 0;
  const char* what = nullptr;
};

// Reads a trace held in memory, checking every byte it consumes. After a
// failed call, problem() tells where and why; the reader then stays failed.
// A partial reader accepts a trace cut after any complete record (a process
// that crashed or was killed); complete() tells whether the end record was seen.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size, bool partial = false)
      : data_(data), size_(size), partial_(partial) {}

  bool read_header(Header& header) {
    for (std::uint8_t byte : kMagic) {
      if (at_end()) return fail(position_, "truncated header");
      if (data_[position_] != byte) return fail(position_, "wrong magic (not a runsel trace)");
      ++position_;
    }
    if (at_end()) return fail(position_, "truncated header");
    header.version = data_[position_];
    if (header.version < kOldestVersion || header.version > kVersion)
      return fail(position_, "unsupported trace version");
    version_ = header.version;
    ++position_;
    if (at_end()) return fail(position_, "truncated header");
    header.flags = data_[position_];
    if (header.flags & ~kKnownFlags) return fail(position_, "unknown header flags");
    ++position_;
    return varint(header.pid, position_);
  }

  // False at the end of the trace, or on a problem (then problem() says which).
  bool next(Record& r) {
    if (decode(r)) return true;
    if (partial_ && problem_.what != nullptr && problem_.offset == size_) {
      problem_ = {};  // a partial trace may be cut anywhere after its header
      complete_ = false;
      stopped_ = true;
    }
    return false;
  }

  const Problem& problem() const { return problem_; }
  bool complete() const { return complete_; }
  bool failed() const { return problem_.what != nullptr; }
  std::size_t offset() const { return position_; }
  std::uint64_t records() const { return records_; }

 private:
  bool decode(Record& r) {
    if (problem_.what != nullptr || complete_ || stopped_) return false;
    if (at_end()) {
      if (!partial_) fail(position_, "truncated trace (no end record)");
      return false;
    }
    std::size_t start = position_;
    std::uint8_t head = data_[position_++];
    if (head == kEndHead) return end(start);
    std::uint8_t op = head & 0x0F;
    if (op == 0 || op > kLastOp || (op == kMarkOp && version_ < 2)) return fail(start, "bad op");
    r = Record{};
    r.op = static_cast<Op>(op);
    r.thread = head >> 4;
    if (r.thread == 15) {
      std::uint64_t thread = 0;
      if (!varint(thread, start)) return false;
      if (thread < 15 || thread > UINT32_MAX) return fail(start, "bad thread id");
      r.thread = static_cast<std::uint32_t>(thread);
    }
    if (has_input(r.op) && !pointer(r.input, start)) return false;
    if (has_alignment(r.op) && !varint(r.alignment, start)) return false;
    if (has_count(r.op) && !varint(r.count, start)) return false;
    if (has_size(r.op) && !varint(r.size, start)) return false;
    if (has_result(r.op) && !pointer(r.result, start)) return false;
    if (r.op == Op::mark && !label(r, start)) return false;
    ++records_;
    return true;
  }

  bool at_end() const { return position_ >= size_; }

  bool fail(std::size_t offset, const char* what) {
    problem_ = {offset, what};
    return false;
  }

  bool end(std::size_t start) {
    if (size_ - start < kEndRecord) return fail(size_, "truncated end record");
    std::uint64_t count = 0;
    for (int i = 0; i < 8; ++i)
      count |= static_cast<std::uint64_t>(data_[start + 1 + i]) << (8 * i);
    if (count != records_) return fail(start, "end record count differs from the records read");
    position_ = start + kEndRecord;
    if (!at_end()) return fail(position_, "data after the end record");
    complete_ = true;
    return false;
  }

  // A problem inside a record is reported at the record's first byte, with
  // the kind of damage; truncation is reported where the bytes ran out.
  bool varint(std::uint64_t& value, std::size_t record_start) {
    value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (at_end()) return fail(position_, "truncated record");
      std::uint8_t byte = data_[position_++];
      if (shift == 63 && byte > 1) return fail(record_start, "varint overflows 64 bits");
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return true;
    }
    return fail(record_start, "varint longer than 10 bytes");
  }

  bool label(Record& r, std::size_t record_start) {
    std::uint64_t length = 0;
    if (!varint(length, record_start)) return false;
    if (length == 0 || length > kMaxLabel) return fail(record_start, "bad mark label length");
    if (size_ - position_ < length) return fail(size_, "truncated record");
    for (std::size_t i = 0; i < length; ++i)
      if (!label_byte(data_[position_ + i])) return fail(record_start, "bad byte in mark label");
    r.label = reinterpret_cast<const char*>(data_ + position_);
    r.label_length = static_cast<std::uint32_t>(length);
    position_ += length;
    return true;
  }

  static constexpr std::uint8_t kMarkOp = static_cast<std::uint8_t>(Op::mark);

  bool pointer(std::uint64_t& address, std::size_t record_start) {
    std::uint64_t code = 0;
    if (!varint(code, record_start)) return false;
    address = pointers_.decode(code);
    return true;
  }

  const std::uint8_t* data_;
  std::size_t size_;
  bool partial_;
  bool complete_ = false;
  bool stopped_ = false;  // a partial trace's cut was reached
  std::uint8_t version_ = kVersion;
  std::size_t position_ = 0;
  std::uint64_t records_ = 0;
  PointerCoder pointers_;
  Problem problem_;
};

}  // namespace runsel::trace

#endif
