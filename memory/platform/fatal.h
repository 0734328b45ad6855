// The one way runsel writes: message() writes one line to stderr, fatal()
// writes one line and aborts. Every layer uses them (assertions, container
// link checks, bad pointers, lock re-entry, settings, the heap walkers). A
// line is formatted into a buffer on the stack and written with write(2): no
// allocation, no stdio and no lock, since they run inside malloc, in a forked
// child and after a signal interrupted the allocator. The reports a program
// asks for (malloc_stats(), the RUNSEL_STATS line) are formatted by their own
// code and written by the same write_text().
#pragma once

#include <errno.h>
#include <unistd.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace runsel {

// Text of a known length, not NUL-terminated (a slice of an environment
// variable, say).
struct TextSlice {
  const char* data;
  std::size_t length;
};

// Writes all of `text` to file descriptor `fd`, retrying short and
// interrupted writes; errno is left as it was. Inline, with no call into
// os.cpp, so that header-only users (the unit tests of the containers) link.
inline void write_text(int fd, const char* text, std::size_t length) {
  const int saved_errno = errno;
  while (length > 0) {
    const ssize_t written = ::write(fd, text, length);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) break;
    text += written;
    length -= static_cast<std::size_t>(written);
  }
  errno = saved_errno;
}

namespace message_detail {

// One line under construction. A line longer than the buffer is cut short;
// it always ends with its newline.
class Line {
 public:
  void add(TextSlice text) {
    const std::size_t room = kCapacity - 1 - length_;  // one byte kept for '\n'
    const std::size_t length = text.length < room ? text.length : room;
    std::memcpy(text_ + length_, text.data, length);
    length_ += length;
  }
  void add(const char* text) {
    if (text == nullptr) text = "(null)";
    add(TextSlice{text, std::strlen(text)});
  }
  // "0x" and lowercase hex digits, as glibc's "%p" prints it ("(nil)" for null).
  void add(const void* address) {
    std::uintptr_t value = reinterpret_cast<std::uintptr_t>(address);
    if (value == 0) return add("(nil)");
    char digits[2 + 2 * sizeof(value)];
    char* end = digits + sizeof(digits);
    char* first = end;
    do {
      *--first = "0123456789abcdef"[value & 15];
      value >>= 4;
    } while (value != 0);
    *--first = 'x';
    *--first = '0';
    add(TextSlice{first, static_cast<std::size_t>(end - first)});
  }
  // In decimal.
  template <std::integral Number>
  void add(Number number) {
    char digits[24];
    char* end = digits + sizeof(digits);
    char* first = end;
    bool negative = false;
    if constexpr (std::is_signed_v<Number>) negative = number < 0;
    std::uint64_t value = static_cast<std::uint64_t>(number);
    if (negative) value = 0 - value;
    do {
      *--first = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    if (negative) *--first = '-';
    add(TextSlice{first, static_cast<std::size_t>(end - first)});
  }
  // To stderr, with its newline.
  void write() {
    text_[length_++] = '\n';
    write_text(2, text_, length_);
  }

 private:
  static constexpr std::size_t kCapacity = 1024;
  char text_[kCapacity];
  std::size_t length_ = 0;
};

}  // namespace message_detail

// Writes "runsel: " and `parts` (text, TextSlice, pointers in hex, integers
// in decimal) as one line on stderr.
template <class... Parts>
[[gnu::cold]] void message(const Parts&... parts) {
  message_detail::Line line;
  line.add("runsel: ");
  (line.add(parts), ...);
  line.write();
}

// message(parts...), then abort().
template <class... Parts>
[[noreturn, gnu::cold, gnu::noinline]] void fatal(const Parts&... parts) {
  message(parts...);
  std::abort();
}

// A container found the links in a run's header not what they must be: a
// link to something that is not a member, or a back link that disagrees.
// Writes "runsel: run R: container links damaged (a write into its
// header?)", R the run whose links were followed, and aborts. When the
// disagreement is between two runs' links, either header may be the damaged
// one: `other` names the second, "(a write into its header, or into run O's?)".
[[noreturn, gnu::cold, gnu::noinline]] inline void container_links_damaged(
    const void* run, const void* other = nullptr) {
  if (other == nullptr) fatal("run ", run, ": container links damaged (a write into its header?)");
  fatal("run ", run, ": container links damaged (a write into its header, or into run ", other,
        "'s?)");
}

// A double free (or a free of something that is not a live region) found
// when an arena took in the frees other threads had queued for it (its
// remote frees): the freeing thread has moved on, so the message names the
// pointer and when it was found. Writes "runsel: free(P): PROBLEM (found when
// its arena took in frees from other threads)" and aborts.
[[noreturn, gnu::cold, gnu::noinline]] inline void remote_free_rejected(const void* pointer,
                                                                        const char* problem) {
  fatal("free(", pointer, "): ", problem,
        " (found when its arena took in frees from other threads)");
}

}  // namespace runsel
