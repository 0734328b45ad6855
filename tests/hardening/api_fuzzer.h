// The API fuzzer shared by the seeded test (api_fuzz_test.cpp) and the
// libFuzzer target (api_fuzz_target.cpp): random sequences of every allocation
// call with edge-heavy sizes and alignments, each result checked against what
// the call promises (alignment, usable size, errno, zeroed calloc, prefix kept
// by realloc), and a byte pattern in every live block verified before the
// block is touched again.
#pragma once

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "runsel.h"
#include "support/blocks.h"
#include "support/heap.h"
#include "support/seeds.h"

// glibc declares these only under some feature macros.
extern "C" void* pvalloc(size_t size) noexcept;
extern "C" void* valloc(size_t size) noexcept;
extern "C" void* reallocarray(void* p, size_t count, size_t size) noexcept;

namespace runsel_test::api_fuzz {

inline constexpr size_t kMaxSmall = 3840;
inline constexpr size_t kMaxLarge = 252 * kPage;  // 1032192: the largest run a chunk holds
inline constexpr size_t kMaxRequest = PTRDIFF_MAX;

// Sizes a user may ask for, weighted towards the boundaries between classes
// and kinds; the last few cannot be served.
inline std::vector<size_t> edge_sizes() {
  std::vector<size_t> sizes = {0, 1, 2, 7, 8, 9, 15};
  for (size_t s = 16; s <= 496; s += 16) sizes.insert(sizes.end(), {s - 1, s, s + 1});
  for (size_t s = 512; s <= kMaxSmall; s += 256) sizes.insert(sizes.end(), {s - 1, s, s + 1});
  for (size_t s : {kPage, 2 * kPage, 3 * kPage, 16 * kPage, 64 * kPage, 65 * kPage, kMaxLarge,
                   kChunk, 2 * kChunk})
    sizes.insert(sizes.end(), {s - 1, s, s + 1});
  return sizes;
}
inline const std::array<size_t, 6> kUnservable = {kMaxRequest + 1,         SIZE_MAX,
                                                  SIZE_MAX - kPage,        SIZE_MAX - kChunk,
                                                  kMaxRequest - kPage + 2, size_t{1} << 63};

inline const std::array<size_t, 16> kGoodAlignments = {
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 65536, kChunk};
inline const std::array<size_t, 10> kBadAlignments = {
    0, 3, 12, 24, 48, 100, 4097, kChunk + kPage, SIZE_MAX, kMaxRequest};

struct Block {
  void* p = nullptr;
  size_t size = 0;       // bytes the caller asked for
  size_t usable = 0;     // malloc_usable_size when it was made
  size_t alignment = 0;  // alignment it was asked for (0: malloc's)
  uint64_t key = 0;      // pattern
  const char* made_by = "";
};

// Counts per call, reported at the end.
struct Counts {
  std::array<size_t, 12> calls{};
  size_t checks = 0, refused = 0, verified_bytes = 0;
  size_t total() const {
    size_t sum = 0;
    for (size_t c : calls) sum += c;
    return sum;
  }
};
inline const char* const kCallNames[12] = {
    "malloc",   "calloc", "realloc", "free",         "posix_memalign",     "aligned_alloc",
    "memalign", "valloc", "pvalloc", "reallocarray", "malloc_usable_size", "realloc(NULL)"};

// Source: where every choice comes from, with below(n) (0..n-1) and
// one_in(n): Random for the seeded test, the fuzzer's input bytes for the
// libFuzzer target. Pattern keys come from their own sequence (key_seed), so
// blocks stay distinguishable whatever the source gives.
template <class Source>
class Fuzzer {
 public:
  Fuzzer(Source source, size_t slots, uint64_t key_seed)
      : random_(source), key_state_(key_seed), live_(slots), edges_(edge_sizes()) {}
  ~Fuzzer() { release_all(); }

  // Frees every live block (counted as frees).
  void release_all() {
    for (Block& b : live_) release(b);
  }

  // One random call; false (with a message) when something is wrong.
  bool step(std::string* error) {
    Block& slot = live_[random_.below(live_.size())];
    if (slot.p != nullptr && !verify(slot, error)) return false;
    switch (random_.below(12)) {
      case 0:
        return replace(slot, call_malloc(), error);
      case 1:
        return replace(slot, call_calloc(error), error);
      case 2:
        return call_realloc(slot, false, error);
      case 3:
        release(slot);
        return true;
      case 4:
        return replace(slot, call_posix_memalign(error), error);
      case 5:
        return replace(slot, call_aligned("aligned_alloc", error), error);
      case 6:
        return replace(slot, call_aligned("memalign", error), error);
      case 7:
        return replace(slot, call_page_aligned(false, error), error);
      case 8:
        return replace(slot, call_page_aligned(true, error), error);
      case 9:
        return call_realloc(slot, true, error);
      case 10:
        ++counts_.calls[10];
        if (slot.p && malloc_usable_size(slot.p) != slot.usable) {
          *error = "malloc_usable_size changed for a live block";
          return false;
        }
        return true;
      default:
        ++counts_.calls[11];
        release(slot);
        return replace(slot, call_realloc_null(), error);
    }
  }

  bool verify_all(std::string* error) {
    for (Block& b : live_)
      if (b.p && !verify(b, error)) return false;
    return true;
  }

  const Counts& counts() const { return counts_; }
  const Source& source() const { return random_; }

 private:
  // Mostly edge sizes, some uniform small/large, rarely huge or unservable.
  size_t draw_size() {
    uint64_t r = random_.below(1000);
    if (r < 600) return edges_[random_.below(edges_.size())];
    if (r < 850) return random_.below(kMaxSmall + 1);
    if (r < 985) return kMaxSmall + 1 + random_.below(size_t{1} << (8 + random_.below(13)));
    if (r < 995) return kMaxLarge + random_.below(3 * kChunk);
    return kUnservable[random_.below(kUnservable.size())];
  }
  size_t draw_alignment(bool* bad) {
    *bad = random_.one_in(12);
    if (*bad) return kBadAlignments[random_.below(kBadAlignments.size())];
    if (random_.one_in(200)) return size_t{1} << (32 + random_.below(31));  // absurd but valid
    return kGoodAlignments[random_.below(kGoodAlignments.size())];
  }
  // Sizes up to 64 GiB must be served (overcommit); above PTRDIFF_MAX must
  // be refused; in between a refusal (ENOMEM) or a real block is fine.
  static bool servable(size_t size) { return size <= kMaxRequest; }
  static bool must_serve(size_t size) { return size <= (size_t{1} << 36); }
  static bool power_of_two(size_t x) { return x && !(x & (x - 1)); }

  Block made(void* p, const char* by, size_t size = SIZE_MAX, size_t alignment = 0) {
    Block b;
    b.p = p;
    b.size = size;
    b.alignment = alignment;
    b.made_by = by;
    return b;
  }

  Block call_malloc() {
    ++counts_.calls[0];
    size_t size = draw_size();
    errno = 0;
    Block b = made(malloc(size), "malloc", size);
    b.key = errno;  // errno checked in replace()
    return b;
  }
  Block call_realloc_null() {
    size_t size = draw_size();
    errno = 0;
    Block b = made(realloc(nullptr, size), "realloc(NULL)", size);
    b.key = errno;
    return b;
  }
  Block call_calloc(std::string* error) {
    ++counts_.calls[1];
    size_t size = draw_size();
    size_t count = 1;
    uint64_t shape = random_.below(8);
    if (shape == 0 && size > 1) count = 2 + random_.below(4), size /= count;
    if (shape == 1) count = SIZE_MAX / (size ? size : 1) + 1;  // overflows unless size <= 1
    size_t total;
    bool overflows = __builtin_mul_overflow(count, size, &total);
    errno = 0;
    void* p = calloc(count, size);
    if (overflows && p) {
      *error = "calloc(" + std::to_string(count) + ", " + std::to_string(size) +
               ") overflows but returned a block";
      free(p);
      return made(nullptr, "calloc", 0);
    }
    if (p) {
      const unsigned char* bytes = static_cast<const unsigned char*>(p);
      for (size_t i = 0; i < total; ++i)
        if (bytes[i] != 0) {
          *error = "calloc(" + std::to_string(count) + ", " + std::to_string(size) + ") byte " +
                   std::to_string(i) + " is not zero";
          return made(p, "calloc", total);
        }
    }
    Block b = made(p, "calloc", overflows ? SIZE_MAX : total);
    b.key = errno;
    return b;
  }
  Block call_posix_memalign(std::string* error) {
    ++counts_.calls[4];
    bool bad;
    size_t alignment = draw_alignment(&bad);
    if (random_.one_in(3) && alignment < sizeof(void*)) bad = true;
    size_t size = draw_size();
    void* sentinel = reinterpret_cast<void*>(uintptr_t{0x5A5A});
    void* p = sentinel;
    int result = posix_memalign(&p, alignment, size);
    bool expect_einval = !power_of_two(alignment) || alignment < sizeof(void*);
    if (expect_einval) {
      if (result != EINVAL || p != sentinel)
        *error = "posix_memalign(alignment " + std::to_string(alignment) + ") returned " +
                 std::to_string(result) + ", not EINVAL with *result untouched";
      if (result == 0 && p != sentinel) free(p);
      return made(nullptr, "posix_memalign", 0);
    }
    if (result != 0) {
      if (result != ENOMEM || p != sentinel)
        *error = "posix_memalign failed with " + std::to_string(result) +
                 " (want ENOMEM, *result untouched)";
      Block b = made(nullptr, "posix_memalign", size, alignment);
      b.key = ENOMEM;
      return b;
    }
    Block b = made(p, "posix_memalign", size, alignment);
    b.key = ENOMEM;
    return b;
  }
  Block call_aligned(const char* which, std::string* error) {
    bool aligned_alloc_call = which[0] == 'a';
    ++counts_.calls[aligned_alloc_call ? 5 : 6];
    bool bad;
    size_t alignment = draw_alignment(&bad);
    size_t size = draw_size();
    errno = 0;
    void* p = aligned_alloc_call ? aligned_alloc(alignment, size) : memalign(alignment, size);
    if (!power_of_two(alignment)) {
      if (p || errno != EINVAL)
        *error = std::string(which) + "(" + std::to_string(alignment) + ", " +
                 std::to_string(size) + "): want NULL and EINVAL for a bad alignment";
      free(p);
      return made(nullptr, which, 0);
    }
    Block b = made(p, which, size, alignment);
    b.key = errno;
    return b;
  }
  Block call_page_aligned(bool rounded, std::string* error) {
    ++counts_.calls[rounded ? 8 : 7];
    size_t size = draw_size();
    errno = 0;
    void* p = rounded ? pvalloc(size) : valloc(size);
    Block b = made(p, rounded ? "pvalloc" : "valloc", size, kPage);
    if (p && rounded) {
      size_t want = size == 0 ? kPage : (size + kPage - 1) & ~(kPage - 1);
      if (malloc_usable_size(p) < want)
        *error = "pvalloc(" + std::to_string(size) + ") usable " +
                 std::to_string(malloc_usable_size(p)) + " < " + std::to_string(want);
    }
    b.key = errno;
    return b;
  }

  // Checks a fresh result (in b) and puts it in slot, freeing what was there.
  bool replace(Block& slot, Block b, std::string* error) {
    if (!error->empty()) {
      free(b.p);
      return false;
    }
    int saved_errno = static_cast<int>(b.key);
    if (b.p == nullptr) {
      if (b.size == 0 && b.alignment == 0) return true;  // an expected refusal, already checked
      ++counts_.refused;
      // Alignments of 4 GiB and more may be refused; nothing else servable.
      if (must_serve(b.size) && b.alignment < (size_t{1} << 32)) {
        *error = std::string(b.made_by) + "(" + std::to_string(b.size) + ", alignment " +
                 std::to_string(b.alignment) + ") returned NULL";
        return false;
      }
      if (saved_errno != ENOMEM) {
        *error = std::string(b.made_by) + "(" + std::to_string(b.size) +
                 ") returned NULL with errno " + std::to_string(saved_errno) + ", not ENOMEM";
        return false;
      }
      return true;
    }
    if (!servable(b.size)) {
      *error = std::string(b.made_by) + "(" + std::to_string(b.size) + ") returned a block";
      free(b.p);
      return false;
    }
    if (!admit(b, error)) {
      free(b.p);
      return false;
    }
    release(slot);
    slot = b;
    return true;
  }

  // A new block: aligned, big enough, usable size as promised; then patterned.
  bool admit(Block& b, std::string* error) {
    size_t need_alignment = b.alignment > 16 ? b.alignment : 16;
    if (reinterpret_cast<uintptr_t>(b.p) % need_alignment != 0) {
      *error = std::string(b.made_by) + "(" + std::to_string(b.size) + ", alignment " +
               std::to_string(b.alignment) + ") is misaligned";
      return false;
    }
    b.usable = malloc_usable_size(b.p);
    if (b.usable < b.size || b.usable == 0) {
      *error = std::string(b.made_by) + "(" + std::to_string(b.size) + ") usable size " +
               std::to_string(b.usable);
      return false;
    }
    if (b.alignment == 0 && b.usable != runsel_good_size(b.size)) {
      *error = std::string(b.made_by) + "(" + std::to_string(b.size) + ") usable size " +
               std::to_string(b.usable) + " != runsel_good_size " +
               std::to_string(runsel_good_size(b.size));
      return false;
    }
    b.key = splitmix(key_state_);
    fill_pattern(b.p, 0, b.usable, b.key);
    return true;
  }

  bool verify(const Block& b, std::string* error) {
    size_t bad = first_mismatch(b.p, b.usable, b.key);
    counts_.verified_bytes += b.usable;
    if (bad == kNoMismatch) return true;
    char text[200];
    snprintf(text, sizeof text, "block %p (%s of %zu, usable %zu) corrupted at byte %zu", b.p,
             b.made_by, b.size, b.usable, bad);
    *error = text;
    return false;
  }

  void release(Block& slot) {
    if (slot.p) ++counts_.calls[3];
    free(slot.p);
    slot = Block{};
  }

  // realloc / reallocarray of the slot's block: the common prefix survives.
  bool call_realloc(Block& slot, bool array, std::string* error) {
    ++counts_.calls[array ? 9 : 2];
    size_t size = draw_size(), count = 1;
    if (array) {
      uint64_t shape = random_.below(6);
      if (shape == 0 && size > 1) count = 2 + random_.below(4), size /= count;
      if (shape == 1) count = SIZE_MAX / (size ? size : 1) + 1;
    }
    size_t total;
    bool overflows = __builtin_mul_overflow(count, size, &total);
    errno = 0;
    void* q = array ? reallocarray(slot.p, count, size) : realloc(slot.p, size);
    const char* name = array ? "reallocarray" : "realloc";
    if (q == nullptr) {
      ++counts_.refused;
      if (!overflows && must_serve(total)) {
        *error = std::string(name) + "(" + std::to_string(total) + ") returned NULL";
        return false;
      }
      if (errno != ENOMEM) {
        *error = std::string(name) + " refused with errno " + std::to_string(errno);
        return false;
      }
      // The old block must be intact.
      return slot.p == nullptr || verify(slot, error);
    }
    if (overflows || !servable(total)) {
      *error = std::string(name) + "(" + std::to_string(total) + ") returned a block";
      free(q);
      return false;
    }
    Block b = made(q, name, total);
    size_t kept = slot.p ? (slot.usable < total ? slot.usable : total) : 0;
    if (kept) {
      // Only the prefix the old block and the new size share is promised.
      size_t bad = first_mismatch(q, kept, slot.key);
      if (bad != kNoMismatch) {
        *error = std::string(name) + " lost byte " + std::to_string(bad) + " of " +
                 std::to_string(kept) + " kept bytes";
        slot = Block{};  // the old pointer is gone either way
        free(q);
        return false;
      }
    }
    if (slot.p && q != slot.p) ++counts_.calls[3];  // realloc freed the old block
    slot = Block{};
    b.size = total ? total : 0;
    if (!admit(b, error)) {
      free(q);
      return false;
    }
    slot = b;
    return true;
  }

  Source random_;
  uint64_t key_state_;
  std::vector<Block> live_;
  std::vector<size_t> edges_;
  Counts counts_;
};

inline std::string describe(const Counts& counts) {
  std::string text = std::to_string(counts.total()) + " calls (";
  for (size_t i = 0; i < counts.calls.size(); ++i)
    text += std::string(i ? ", " : "") + kCallNames[i] + " " + std::to_string(counts.calls[i]);
  text += "), " + std::to_string(counts.refused) + " refused as expected, " +
          std::to_string(counts.checks) + " runsel_check() calls, " +
          std::to_string(counts.verified_bytes >> 20) + " MiB verified";
  return text;
}

}  // namespace runsel_test::api_fuzz
