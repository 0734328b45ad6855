// The fatal-error path: formats one line without allocating and aborts.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "frontend/frontend.h"
#include "platform/os.h"

namespace runsel {

void fatal_pointer(const char* function, const void* pointer, const char* problem) {
  char line[512];
  int n = std::snprintf(line, sizeof(line), "runsel: %s(%p): %s\n", function, pointer, problem);
  if (n < 0) n = 0;
  if (static_cast<std::size_t>(n) >= sizeof(line)) n = sizeof(line) - 1;
  os::write_all(2, line, static_cast<std::size_t>(n));
  abort();
}

void fatal_corrupt_run(const char* function, const void* pointer, const void* run) {
  char problem[256];
  std::snprintf(problem, sizeof(problem),
                "heap corruption: the header of run %p is damaged (a write past the end of the "
                "block before it?)",
                run);
  fatal_pointer(function, pointer, problem);
}

}  // namespace runsel
