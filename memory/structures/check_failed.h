// How every invariant walker in structures/ and containers/ reports the first
// violation it finds: `return check_failed(why, "what is wrong");`.
#pragma once

namespace runsel {

// Sets *why to `reason` (when why is not null) and returns false.
inline bool check_failed(const char** why, const char* reason) {
  if (why != nullptr) *why = reason;
  return false;
}

}  // namespace runsel
