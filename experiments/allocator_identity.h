// Which allocator serves this process's malloc, for programs that are not linked with
// runsel and run under any allocator through LD_PRELOAD (workloads, benchmarks).
// Header-only; shared so every experiment proves its allocator the same way.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace experiments {

struct AllocatorIdentity {
  std::string
      name;  // "runsel:<variant>", "jemalloc", "tcmalloc", "mimalloc", "glibc", "unknown:<path>"
  std::string provider;  // real path of the object whose `malloc` this process calls
  std::string purge;     // runsel's purge policy in force (runsel_purge_policy()), else ""
  std::string profile;   // runsel's build profile, "fast" or "faithful"
                         // (runsel_build_profile()), else ""
};

inline std::string real_path_of(const char* path) {
  char buffer[PATH_MAX];
  return realpath(path, buffer) != nullptr ? std::string(buffer) : std::string(path);
}

// Classifies a library path (or /proc/self/maps text) by the allocator it names.
inline std::string allocator_named_in(std::string_view text) {
  if (text.find("libjemalloc") != std::string_view::npos) return "jemalloc";
  if (text.find("libtcmalloc") != std::string_view::npos) return "tcmalloc";
  if (text.find("libmimalloc") != std::string_view::npos) return "mimalloc";
  return {};
}

// Fallback when dladdr cannot name malloc's object: any known allocator mapped.
inline std::string allocator_in_proc_maps() {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string maps;
  char chunk[4096];
  for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;) maps.append(chunk, size_t(n));
  close(fd);
  return allocator_named_in(maps);
}

// The global lookup scope is what every malloc call in this process binds to, so the
// object defining the first `malloc` in it is the allocator that serves us; runsel
// also answers runsel_variant(), which names its container.
inline AllocatorIdentity detect_allocator() {
  AllocatorIdentity identity;
  Dl_info info{};
  void* malloc_symbol = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_symbol != nullptr && dladdr(malloc_symbol, &info) != 0 && info.dli_fname != nullptr)
    identity.provider = real_path_of(info.dli_fname);

  using VariantFunction = const char* (*)();
  auto variant = reinterpret_cast<VariantFunction>(dlsym(RTLD_DEFAULT, "runsel_variant"));
  if (variant != nullptr) {
    const char* variant_name = variant();
    identity.name = std::string("runsel:") + (variant_name != nullptr ? variant_name : "?");
    auto policy = reinterpret_cast<VariantFunction>(dlsym(RTLD_DEFAULT, "runsel_purge_policy"));
    const char* policy_name = policy != nullptr ? policy() : nullptr;
    identity.purge = policy_name != nullptr ? policy_name : "";
    auto profile = reinterpret_cast<VariantFunction>(dlsym(RTLD_DEFAULT, "runsel_build_profile"));
    const char* profile_name = profile != nullptr ? profile() : nullptr;
    identity.profile = profile_name != nullptr ? profile_name : "";
    return identity;
  }
  if (!identity.provider.empty()) {
    identity.name = allocator_named_in(identity.provider);
    if (identity.name.empty() && identity.provider.find("/libc.so") != std::string::npos)
      identity.name = "glibc";
    if (identity.name.empty()) identity.name = "unknown:" + identity.provider;
    return identity;
  }
  identity.name = allocator_in_proc_maps();
  if (identity.name.empty()) identity.name = "unknown:";
  return identity;
}

}  // namespace experiments
