// The front end's fatal messages about a pointer passed to the C API, written
// through the one fatal path (platform/fatal.h).
#include "frontend/frontend.h"
#include "platform/fatal.h"

namespace runsel {

void fatal_pointer(const char* function, const void* pointer, const char* problem) {
  fatal(function, "(", pointer, "): ", problem);
}

void fatal_corrupt_run(const char* function, const void* pointer, const void* run) {
  fatal(function, "(", pointer, "): heap corruption: the header of run ", run,
        " is damaged (a write past the end of the block before it?)");
}

}  // namespace runsel
