// C++ operator new and delete, routed to runsel's malloc family. Compiled
// with exceptions so that failure throws std::bad_alloc after trying the
// installed new_handler, as the standard requires.
#include <cstdlib>
#include <new>

#define RUNSEL_EXPORT __attribute__((visibility("default")))

extern "C" int posix_memalign(void**, std::size_t, std::size_t) noexcept;

namespace {

void* allocate_or_throw(std::size_t size) {
  for (;;) {
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* allocate_aligned_or_throw(std::size_t size, std::align_val_t alignment) {
  std::size_t align = static_cast<std::size_t>(alignment);
  if (align < sizeof(void*)) align = sizeof(void*);
  for (;;) {
    void* p = nullptr;
    if (posix_memalign(&p, align, size == 0 ? 1 : size) == 0) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

template <class F>
void* nothrow(F allocate) noexcept {
  try {
    return allocate();
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

RUNSEL_EXPORT void* operator new(std::size_t size) { return allocate_or_throw(size); }
RUNSEL_EXPORT void* operator new[](std::size_t size) { return allocate_or_throw(size); }
RUNSEL_EXPORT void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return nothrow([&] { return allocate_or_throw(size); });
}
RUNSEL_EXPORT void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return nothrow([&] { return allocate_or_throw(size); });
}
RUNSEL_EXPORT void* operator new(std::size_t size, std::align_val_t alignment) {
  return allocate_aligned_or_throw(size, alignment);
}
RUNSEL_EXPORT void* operator new[](std::size_t size, std::align_val_t alignment) {
  return allocate_aligned_or_throw(size, alignment);
}
RUNSEL_EXPORT void* operator new(std::size_t size, std::align_val_t alignment,
                                 const std::nothrow_t&) noexcept {
  return nothrow([&] { return allocate_aligned_or_throw(size, alignment); });
}
RUNSEL_EXPORT void* operator new[](std::size_t size, std::align_val_t alignment,
                                   const std::nothrow_t&) noexcept {
  return nothrow([&] { return allocate_aligned_or_throw(size, alignment); });
}

RUNSEL_EXPORT void operator delete(void* p) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete[](void* p) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete(void* p, std::size_t) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
RUNSEL_EXPORT void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
RUNSEL_EXPORT void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
RUNSEL_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
RUNSEL_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
