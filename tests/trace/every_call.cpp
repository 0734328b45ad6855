// Helper program for trace_test. Without arguments: allocates before main (a
// static constructor), then makes each of the ten traced calls once with
// recognizable sizes, from a second thread, so the test can find every record.
// With "--swap": four threads swap blocks through shared slots and free each
// other's, so addresses are reused across threads as fast as possible.
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

// volatile: the compiler must not drop an allocation nobody reads.
void* volatile sink;

struct BeforeMain {
  BeforeMain() { sink = malloc(12345); }
} before_main;

void* every_call(void*) {
  free(sink);
  void* p = malloc(1001);
  p = realloc(p, 1002);
  p = reallocarray(p, 3, 1003);
  free(p);
  free(calloc(4, 1004));
  void* aligned = nullptr;
  if (posix_memalign(&aligned, 64, 1005) == 0) free(aligned);
  free(aligned_alloc(128, 1024));
  free(memalign(256, 1007));
  free(valloc(1008));
  free(pvalloc(1009));
  return nullptr;
}

// Allocation and free happen outside the lock, so only the recorder's own
// ordering keeps a reused address after the free that released it.
pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
void* slots[64];

void* swap_blocks(void* seed) {
  unsigned state = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(seed));
  for (int i = 0; i < 200000; ++i) {
    state = state * 1103515245u + 12345u;
    void* fresh = (state >> 8) % 4 == 0 ? nullptr : malloc(48 + (state >> 12) % 4 * 16);
    pthread_mutex_lock(&slots_lock);
    void*& slot = slots[(state >> 20) % 64];
    void* old = slot;
    slot = fresh;
    pthread_mutex_unlock(&slots_lock);
    free(old);
  }
  return nullptr;
}

int swap_between_threads() {
  pthread_t threads[4];
  for (std::uintptr_t i = 0; i < 4; ++i)
    if (pthread_create(&threads[i], nullptr, swap_blocks, reinterpret_cast<void*>(i + 1)) != 0)
      return 1;
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  for (void* block : slots) free(block);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--swap") == 0) return swap_between_threads();
  pthread_t thread;
  if (pthread_create(&thread, nullptr, every_call, nullptr) != 0) return 1;
  pthread_join(thread, nullptr);
  std::puts("done");
  return 0;
}
