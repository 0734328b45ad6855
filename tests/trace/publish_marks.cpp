// Helper program for trace_test: a driver and its traced program in one process.
// Maps the marks file named by its argument (as a driver would, read-write) and
// publishes checkpoint labels between allocations of recognizable sizes:
//   malloc(3001), mark "first", malloc(3002), marks "second" and "third" at once,
//   free(3001 block), a thread publishes "from a thread" and then mallocs 3003,
//   mark "last" just before exit (seen by the recorder's exit flush).
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

unsigned char* marks_file = nullptr;
std::size_t next_label = 64;
std::uint64_t published = 0;

// Writes the label's bytes, then stores the new count: the recorder reads the
// count with a relaxed load and the labels after an acquire fence.
void publish(const char* label) {
  std::size_t length = std::strlen(label) + 1;
  std::memcpy(marks_file + next_label, label, length);
  next_label += length;
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(marks_file), ++published, __ATOMIC_RELEASE);
}

// volatile: the compiler must not drop an allocation nobody reads.
void* volatile kept;
void* volatile in_thread;

void* thread_body(void*) {
  publish("from a thread");
  in_thread = malloc(3003);
  free(in_thread);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MARKS_FILE\n", argv[0]);
    return 2;
  }
  int fd = open(argv[1], O_RDWR);
  void* file =
      fd < 0 ? MAP_FAILED : mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (file == MAP_FAILED) {
    std::perror(argv[1]);
    return 1;
  }
  marks_file = static_cast<unsigned char*>(file);
  // Labels already published (by the test, before this process started) are skipped.
  published = __atomic_load_n(reinterpret_cast<std::uint64_t*>(marks_file), __ATOMIC_ACQUIRE);
  for (std::uint64_t i = 0; i < published; ++i)
    next_label += std::strlen(reinterpret_cast<char*>(marks_file + next_label)) + 1;

  void* first = malloc(3001);
  publish("first");
  kept = malloc(3002);
  publish("second");
  publish("third");
  free(first);
  pthread_t thread;
  pthread_create(&thread, nullptr, thread_body, nullptr);
  pthread_join(thread, nullptr);
  free(kept);
  publish("last");
  return 0;
}
