// Always-on fatal reports from the layers below the front end (containers,
// structures), which cannot reach its messages: one line on stderr, written
// without allocating and without stdio (they may run inside malloc), then
// abort.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace runsel {

namespace fatal_detail {

// Appends "0x" and the address in lowercase hex, as glibc prints %p.
inline char* append_address(char* out, const void* address) {
  std::uintptr_t value = reinterpret_cast<std::uintptr_t>(address);
  char digits[2 * sizeof(value)];
  int count = 0;
  do {
    digits[count++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0);
  *out++ = '0';
  *out++ = 'x';
  while (count > 0) *out++ = digits[--count];
  return out;
}

inline char* append_text(char* out, const char* text) {
  const std::size_t length = std::strlen(text);
  std::memcpy(out, text, length);
  return out + length;
}

}  // namespace fatal_detail

// A container found the links in a run's header not what they must be: a
// link to something that is not a member, or a back link that disagrees.
// Writes "runsel: run R: container links damaged (a write into its
// header?)", R the run whose links were followed, and aborts. When the
// disagreement is between two runs' links, either header may be the damaged
// one: `other` names the second, "(a write into its header, or into run O's?)".
[[noreturn, gnu::cold, gnu::noinline]] inline void container_links_damaged(
    const void* run, const void* other = nullptr) {
  using fatal_detail::append_address, fatal_detail::append_text;
  char line[160];
  char* end = append_text(line, "runsel: run ");
  end = append_address(end, run);
  end = append_text(end, ": container links damaged (a write into its header");
  if (other != nullptr) {
    end = append_text(end, ", or into run ");
    end = append_address(end, other);
    end = append_text(end, "'s");
  }
  end = append_text(end, "?)\n");
  for (const char* cursor = line; cursor < end;) {
    const ssize_t written = ::write(2, cursor, static_cast<std::size_t>(end - cursor));
    if (written <= 0) break;
    cursor += written;
  }
  std::abort();
}

// A double free (or a free of something that is not a live region) found
// when an arena took in the frees other threads had queued for it (its
// remote frees): the freeing thread has moved on, so the message names the
// pointer and when it was found. Writes "runsel: free(P): PROBLEM (found when
// its arena took in frees from other threads)" and aborts.
[[noreturn, gnu::cold, gnu::noinline]] inline void remote_free_rejected(const void* pointer,
                                                                       const char* problem) {
  using fatal_detail::append_address, fatal_detail::append_text;
  char line[320];
  char* end = append_text(line, "runsel: free(");
  end = append_address(end, pointer);
  end = append_text(end, "): ");
  const std::size_t room = sizeof(line) - static_cast<std::size_t>(end - line) - 64;
  const std::size_t length = std::strlen(problem) < room ? std::strlen(problem) : room;
  std::memcpy(end, problem, length);
  end += length;
  end = append_text(end, " (found when its arena took in frees from other threads)\n");
  for (const char* cursor = line; cursor < end;) {
    const ssize_t written = ::write(2, cursor, static_cast<std::size_t>(end - cursor));
    if (written <= 0) break;
    cursor += written;
  }
  std::abort();
}

}  // namespace runsel
