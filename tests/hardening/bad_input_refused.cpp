// Bad input that is refused or tolerated, checked in-process (each check
// returns "" or what went wrong): impossible sizes and alignments, null and
// zero, the usable size of bad pointers; and what a successful call leaves
// (errno, calloc's zeroes).
#include <thread>

#include "bad_input.h"

namespace bad_input {
namespace {

// ---- Misuses that are refused or tolerated: checked in-process; each
// returns "" or what went wrong.

std::string expect_enomem(void* p, const char* call) {
  int e = errno;
  free(p);
  if (p != nullptr) return std::string(call) + " returned a block";
  if (e != ENOMEM) return std::string(call) + ": errno " + std::to_string(e) + ", want ENOMEM";
  return "";
}
std::string expect_einval(void* p, const char* call) {
  int e = errno;
  free(p);
  if (p != nullptr) return std::string(call) + " returned a block";
  if (e != EINVAL) return std::string(call) + ": errno " + std::to_string(e) + ", want EINVAL";
  return "";
}

std::string huge_sizes() {
  for (size_t size : {kTooBig, SIZE_MAX, SIZE_MAX - 4095}) {
    errno = 0;
    std::string why = expect_enomem(opaque(malloc(size)), "malloc");
    if (why.empty()) why = expect_enomem(opaque(realloc(nullptr, size)), "realloc(NULL)");
    if (why.empty()) why = expect_enomem(opaque(valloc(size)), "valloc");
    if (why.empty()) why = expect_enomem(opaque(pvalloc(size)), "pvalloc");
    if (why.empty()) why = expect_enomem(opaque(aligned_alloc(64, size)), "aligned_alloc");
    if (!why.empty()) return why + " of " + std::to_string(size);
  }
  return "";
}
std::string calloc_overflow() {
  const size_t cases[][2] = {{SIZE_MAX / 2 + 1, 2}, {2, SIZE_MAX / 2 + 1},
                             {SIZE_MAX, SIZE_MAX},  {size_t{1} << 32, size_t{1} << 32},
                             {1, kTooBig},          {kTooBig / 2 + 1, 2}};
  for (const auto& c : cases) {
    errno = 0;
    std::string why = expect_enomem(opaque(calloc(c[0], c[1])), "calloc");
    if (!why.empty()) return why + " (" + std::to_string(c[0]) + " x " + std::to_string(c[1]) + ")";
  }
  return "";
}
// The old block is untouched by a refused realloc/reallocarray.
std::string refused_resize(bool array) {
  for (size_t size : {kSmall, kLarge, kHuge}) {
    unsigned char* p = static_cast<unsigned char*>(malloc(size));
    memset(p, 0x5C, size);
    errno = 0;
    void* q = array ? reallocarray(p, SIZE_MAX / 2 + 1, 2) : realloc(p, kTooBig);
    std::string why = expect_enomem(opaque(q), array ? "reallocarray" : "realloc");
    for (size_t i = 0; why.empty() && i < size; ++i)
      if (p[i] != 0x5C) why = "old block changed at byte " + std::to_string(i);
    if (why.empty() && malloc_usable_size(p) < size) why = "old block lost";
    free(p);
    if (!why.empty()) return why + " (block of " + std::to_string(size) + ")";
  }
  return "";
}
std::string realloc_overflow() { return refused_resize(false); }
std::string reallocarray_overflow() { return refused_resize(true); }
std::string bad_alignment() {
  for (size_t alignment :
       {size_t{0}, size_t{3}, size_t{24}, size_t{4097}, size_t{PTRDIFF_MAX}, SIZE_MAX}) {
    void* sentinel = reinterpret_cast<void*>(uintptr_t{0x1234});
    void* p = sentinel;
    errno = 0;
    int result = posix_memalign(&p, alignment, 64);
    if (result != EINVAL || p != sentinel || errno != 0)
      return "posix_memalign(" + std::to_string(alignment) + ") returned " +
             std::to_string(result) + " (want EINVAL, *result and errno untouched)";
    errno = 0;
    std::string why = expect_einval(opaque(aligned_alloc(alignment, 64)), "aligned_alloc");
    if (why.empty()) errno = 0, why = expect_einval(opaque(memalign(alignment, 64)), "memalign");
    if (!why.empty()) return why + " with alignment " + std::to_string(alignment);
  }
  // posix_memalign also wants a multiple of sizeof(void*).
  void* p = nullptr;
  if (int result = posix_memalign(&p, sizeof(void*) / 2, 64); result != EINVAL)
    return "posix_memalign(" + std::to_string(sizeof(void*) / 2) + ") returned " +
           std::to_string(result);
  return "";
}
std::string absurd_alignment() {
  for (size_t shift : {47, 52, 62, 63}) {
    size_t alignment = size_t{1} << shift;
    void* p = nullptr;
    int result = posix_memalign(&p, alignment, 64);
    if (result != ENOMEM) {
      if (result == 0) free(p);
      return "posix_memalign(2^" + std::to_string(shift) + ") returned " + std::to_string(result);
    }
    errno = 0;
    std::string why = expect_enomem(opaque(aligned_alloc(alignment, 64)), "aligned_alloc");
    if (why.empty()) errno = 0, why = expect_enomem(opaque(memalign(alignment, 64)), "memalign");
    if (!why.empty()) return why + " with alignment 2^" + std::to_string(shift);
  }
  return "";
}
std::string null_and_zero() {
  free(nullptr);
  if (malloc_usable_size(nullptr) != 0) return "malloc_usable_size(NULL) != 0";
  void* a = malloc(0);
  void* b = malloc(0);
  if (!a || !b || a == b) return "malloc(0) must give distinct blocks";
  if (malloc_usable_size(a) != 16) return "malloc(0) is not a 16-byte region";
  void* c = realloc(a, 0);  // a minimal block, like mozjemalloc; not a free
  if (c == nullptr || malloc_usable_size(c) != 16) return "realloc(p, 0) did not keep a block";
  free(c);
  free(b);
  return "";
}
std::string usable_size_of_bad_pointers() {
  char on_stack[32];
  void* glibc = __libc_malloc(64);
  std::string sizes;
  bool all_zero = true;
  auto probe = [&](const void* p) {
    size_t size = malloc_usable_size(opaque(const_cast<void*>(p)));
    sizes += std::to_string(size) + " ";
    all_zero &= size == 0;
  };
  probe(on_stack);
  probe(glibc);
  __libc_free(glibc);
  for (size_t size : {kSmall, kLarge, kHuge}) {
    void* keep = malloc(size);
    char* p = static_cast<char*>(malloc(size));
    probe(p + (size == kSmall ? 16 : 4096));  // interior
    free(p);
    probe(p);  // freed
    free(keep);
  }
  void* keep = malloc(kSmall);
  void* queued = malloc(kSmall);
  std::thread([queued] { free(queued); }).join();  // queued for this thread's arena
  probe(queued);
  free(keep);
  if (!all_zero) return "malloc_usable_size of bad pointers: " + sizes;
  return "";
}

// A call that succeeds leaves errno as it found it, on every path: C code
// sets errno = 0 and checks it afterwards. The huge in-place growth is made
// to fail (a mapping sits right after the block) so that realloc moves.
std::string errno_after_success() {
  constexpr int kSentinel = 12345;
  std::string why;
  auto kept = [&](void* p, const char* what) {
    if (p == nullptr && why.empty()) why = std::string(what) + " failed";
    if (errno != kSentinel && why.empty())
      why = std::string(what) + " succeeded and set errno to " + std::to_string(errno);
    errno = kSentinel;
    return p;
  };
  errno = kSentinel;
  for (size_t n : {size_t{1}, size_t{100}, size_t{3840}, size_t{5000}, size_t{300000}, kHuge}) {
    free(kept(opaque(malloc(n)), "malloc"));
    free(kept(opaque(calloc(1, n)), "calloc"));
    free(kept(opaque(aligned_alloc(64, n)), "aligned_alloc"));
    free(kept(opaque(memalign(8192, n)), "memalign"));
    free(kept(opaque(valloc(n)), "valloc"));
    free(kept(opaque(pvalloc(n)), "pvalloc"));
    void* p = nullptr;
    if (posix_memalign(&p, 256, n) != 0) return "posix_memalign failed";
    free(kept(p, "posix_memalign"));
  }
  // realloc: small in place and moving, large in place and moving, huge in
  // place (grow, shrink) and moving, and back down to small.
  void* p = kept(opaque(malloc(20)), "malloc");
  p = kept(opaque(realloc(p, 30)), "realloc small in place");
  p = kept(opaque(realloc(p, 300)), "realloc small moving");
  p = kept(opaque(realloc(p, 5000)), "realloc small to large");
  p = kept(opaque(realloc(p, 9000)), "realloc large grow");
  p = kept(opaque(realloc(p, 6000)), "realloc large shrink");
  void* neighbour = opaque(malloc(8 * 4096));  // may block growth in place
  p = kept(opaque(realloc(p, 600000)), "realloc large grow or move");
  free(neighbour);
  p = kept(opaque(realloc(p, kHuge)), "realloc large to huge");
  p = kept(opaque(realloc(p, kHuge + 5000)), "realloc huge grow");
  p = kept(opaque(realloc(p, 2 * kChunk)), "realloc huge shrink");
  char* end = static_cast<char*>(p) + 2 * kChunk;
  void* blocker =
      mmap(end, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (blocker != end) return "could not map right after the huge block";
  errno = kSentinel;
  void* moved = kept(opaque(realloc(p, 8 * kChunk)), "realloc huge moving");
  if (moved == p && why.empty()) why = "the mapping after the block did not force a move";
  munmap(blocker, 4096);
  p = kept(opaque(reallocarray(moved, 100, 10)), "reallocarray huge to small");
  if (malloc_usable_size(p) != 1024 && why.empty()) why = "reallocarray gave a wrong size";
  kept(p, "malloc_usable_size");
  free(p);
  kept(p, "free");
  return why;
}

// calloc zeroes the whole usable size, like glibc, not only the bytes asked
// for: a program may use what malloc_usable_size reports.
std::string calloc_whole_block() {
  for (size_t n : {size_t{17}, size_t{250}, size_t{1000}, size_t{3700}, size_t{5000}}) {
    void* dirty = opaque(malloc(n));
    size_t usable = malloc_usable_size(dirty);
    memset(dirty, 0xA5, usable);
    free(dirty);
    auto* z = static_cast<unsigned char*>(opaque(calloc(1, n)));
    if (z != dirty) return "calloc(" + std::to_string(n) + ") did not reuse the dirty block";
    for (size_t i = 0; i < usable; ++i)
      if (z[i] != 0) return "byte " + std::to_string(i) + " of calloc(" + std::to_string(n) + ")";
    free(z);
  }
  return "";
}

}  // namespace

std::vector<Row> refused_rows() {
  return {
      {"`malloc`, `realloc(NULL, n)`, `valloc`, `pvalloc`, `aligned_alloc` of n > `PTRDIFF_MAX` "
       "(2^63, `SIZE_MAX`, `SIZE_MAX`−4095)",
       "NULL, `errno = ENOMEM`", nullptr, nullptr, nullptr, huge_sizes},
      {"overflowing `calloc` (e.g. `SIZE_MAX/2+1` × 2, 2^32 × 2^32) or product > `PTRDIFF_MAX`",
       "NULL, `errno = ENOMEM`", nullptr, nullptr, nullptr, calloc_overflow},
      {"`realloc(p, n)` with n > `PTRDIFF_MAX`", "NULL, `errno = ENOMEM`, p untouched and live",
       nullptr, nullptr, nullptr, realloc_overflow},
      {"overflowing `reallocarray(p, SIZE_MAX/2+1, 2)`",
       "NULL, `errno = ENOMEM`, p untouched and live", nullptr, nullptr, nullptr,
       reallocarray_overflow},
      {"alignment 0, 3, 24, 4097, `PTRDIFF_MAX`, `SIZE_MAX` (not a power of two); "
       "`posix_memalign` with 4 (< `sizeof(void*)`)",
       "`posix_memalign` returns `EINVAL` (`*result` and `errno` untouched); `aligned_alloc`, "
       "`memalign`: NULL, `errno = EINVAL`",
       nullptr, nullptr, nullptr, bad_alignment},
      {"absurd power-of-two alignment (2^47, 2^52, 2^62, 2^63)",
       "`posix_memalign` returns `ENOMEM`; `aligned_alloc`, `memalign`: NULL, `errno = ENOMEM`",
       nullptr, nullptr, nullptr, absurd_alignment},
      {"`free(NULL)`, `malloc(0)`, `realloc(p, 0)`",
       "no-op; a distinct 16-byte block; a 16-byte block (like mozjemalloc, not a free)", nullptr,
       nullptr, nullptr, null_and_zero},
      {"`malloc_usable_size` of stack or glibc memory, of an interior pointer or of a freed "
       "block (small, large, huge; small freed by another thread)",
       "returns 0 (no abort)", nullptr, nullptr, nullptr, usable_size_of_bad_pointers},
  };
}

std::vector<Row> success_rows() {
  return {
      {"`errno` after a call that succeeds (every allocation call; realloc small, large and "
       "huge, in place and moving, also when growing a huge block in place fails)",
       "unchanged", nullptr, nullptr, nullptr, errno_after_success},
      {"`calloc(1, n)` of a recycled block where the usable size exceeds n",
       "the whole usable size is zero, as `malloc_usable_size` reports it", nullptr, nullptr,
       nullptr, calloc_whole_block},
  };
}

}  // namespace bad_input
