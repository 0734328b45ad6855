// librunsel-firefox-audit.so, the audit half: the dynamic linker's audit interface
// (LD_AUDIT). Every binding of another object (libxul, libc, ...) to one of the
// executable's allocation functions is given recorder.c's wrapper instead
// (la_symbind64; glibc also reports the PLT bindings of objects linked BIND_NOW),
// and the object's GLOB_DAT and R_X86_64_64 slots that hold such a function are
// rewritten to the wrapper (function pointers: Rust code calls through them),
// when its first binding arrives, once the initial objects are relocated
// (la_preinit) and after each dlopen (la_activity). Calls inside the executable
// itself (mozglue) are not seen. A program that is not Firefox's (no
// jemalloc_stats_internal among its exports) is left alone.
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recorder.h"

#define AUDIT_EXPORT __attribute__((visibility("default")))

// --- objects: which is the executable, and their dynamic sections -------------------------

#define MAX_OBJECTS 1024

struct object {
  struct link_map* map;
  bool executable;  // the program: its exports are the allocator
  bool patched;     // its data slots were rewritten after its relocation
};
static struct object objects[MAX_OBJECTS];
static unsigned object_count;
static struct link_map* executable_map;

// A dynamic-section pointer: glibc adjusts most objects' entries to addresses, not all.
static uintptr_t dynamic_address(const struct link_map* map, ElfW(Addr) value) {
  return value < map->l_addr ? map->l_addr + value : value;
}

static const ElfW(Dyn) * dynamic_entry(const struct link_map* map, ElfW(Sxword) tag) {
  for (const ElfW(Dyn)* d = map->l_ld; d != NULL && d->d_tag != DT_NULL; ++d)
    if (d->d_tag == tag) return d;
  return NULL;
}

// The address of `name` defined in `map` (its GNU hash table), or 0.
static uintptr_t defined_address(const struct link_map* map, const char* name) {
  const ElfW(Dyn)* hash = dynamic_entry(map, DT_GNU_HASH);
  const ElfW(Dyn)* symbols = dynamic_entry(map, DT_SYMTAB);
  const ElfW(Dyn)* strings = dynamic_entry(map, DT_STRTAB);
  if (hash == NULL || symbols == NULL || strings == NULL) return 0;
  const uint32_t* table = (const uint32_t*)dynamic_address(map, hash->d_un.d_ptr);
  const ElfW(Sym)* symbol = (const ElfW(Sym)*)dynamic_address(map, symbols->d_un.d_ptr);
  const char* text = (const char*)dynamic_address(map, strings->d_un.d_ptr);
  uint32_t buckets = table[0], offset = table[1], bloom_words = table[2];
  const uint32_t* bucket = table + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
  const uint32_t* chain = bucket + buckets;
  uint32_t h = 5381;
  for (const unsigned char* c = (const unsigned char*)name; *c; ++c) h = h * 33 + *c;
  for (uint32_t i = bucket[h % buckets]; i != 0 && i >= offset; ++i) {
    uint32_t other = chain[i - offset];
    if ((other | 1) == (h | 1) && strcmp(text + symbol[i].st_name, name) == 0 &&
        symbol[i].st_shndx != SHN_UNDEF)
      return map->l_addr + symbol[i].st_value;
    if (other & 1) break;
  }
  return 0;
}

// Rewrites the object's data slots (GLOB_DAT and absolute 64-bit relocations) that
// hold one of the executable's allocation functions so they hold the wrapper. The
// slot's page may be read-only already (RELRO): it is made writable and left so.
static unsigned patch_data_slots(struct link_map* map) {
  const ElfW(Dyn)* rela = dynamic_entry(map, DT_RELA);
  const ElfW(Dyn)* size = dynamic_entry(map, DT_RELASZ);
  const ElfW(Dyn)* symbols = dynamic_entry(map, DT_SYMTAB);
  const ElfW(Dyn)* strings = dynamic_entry(map, DT_STRTAB);
  if (rela == NULL || size == NULL || symbols == NULL || strings == NULL) return 0;
  const ElfW(Rela)* r = (const ElfW(Rela)*)dynamic_address(map, rela->d_un.d_ptr);
  const ElfW(Rela)* end = (const ElfW(Rela)*)((const char*)r + size->d_un.d_val);
  const ElfW(Sym)* symbol = (const ElfW(Sym)*)dynamic_address(map, symbols->d_un.d_ptr);
  const char* text = (const char*)dynamic_address(map, strings->d_un.d_ptr);
  long page = sysconf(_SC_PAGESIZE);
  unsigned patched = 0;
  for (; r < end; ++r) {
    unsigned type = ELF64_R_TYPE(r->r_info), index = ELF64_R_SYM(r->r_info);
    if ((type != R_X86_64_GLOB_DAT && type != R_X86_64_64) || index == 0) continue;
    int function = function_named(text + symbol[index].st_name);
    if (function < 0 || function >= FIRST_EXIT || real[function] == 0) continue;
    uintptr_t* slot = (uintptr_t*)(map->l_addr + r->r_offset);
    uintptr_t expected = real[function] + (type == R_X86_64_64 ? (uintptr_t)r->r_addend : 0);
    if (*slot != expected) continue;  // not bound to the executable (or not yet)
    uintptr_t start = (uintptr_t)slot & ~(uintptr_t)(page - 1);
    if (mprotect((void*)start, (size_t)page * 2, PROT_READ | PROT_WRITE) != 0 &&
        mprotect((void*)start, (size_t)page, PROT_READ | PROT_WRITE) != 0)
      continue;
    *slot = wrapper[function] + (type == R_X86_64_64 ? (uintptr_t)r->r_addend : 0);
    ++patched;
  }
  return patched;
}

static struct object* object_of(uintptr_t* cookie) {
  uintptr_t index = *cookie;
  return index < object_count ? &objects[index] : NULL;
}

static void patch_unpatched(bool relocated) {
  if (!recording()) return;
  for (unsigned i = 0; i < object_count; ++i) {
    if (objects[i].patched || objects[i].executable) continue;
    patch_data_slots(objects[i].map);
    if (relocated) objects[i].patched = true;
  }
}

static uintptr_t executable_export(const char* name) {
  return defined_address(executable_map, name);
}

// --- the audit interface ------------------------------------------------------------------

AUDIT_EXPORT unsigned int la_version(unsigned int version) {
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

AUDIT_EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t namespace_id, uintptr_t* cookie) {
  if (namespace_id != LM_ID_BASE || object_count == MAX_OBJECTS) return 0;
  struct object* o = &objects[object_count];
  o->map = map;
  o->executable = object_count == 0;  // the first object reported is the program
  o->patched = false;
  *cookie = object_count++;
  if (o->executable) {
    executable_map = map;
    if (defined_address(map, "jemalloc_stats_internal") != 0 && defined_address(map, "malloc") != 0)
      start_recording(executable_export);  // another program (a helper, a shell) is left alone
  }
  return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

AUDIT_EXPORT void la_activity(uintptr_t* cookie, unsigned int flag) {
  (void)cookie;
  if (flag == LA_ACT_CONSISTENT) patch_unpatched(false);
}

AUDIT_EXPORT void la_preinit(uintptr_t* cookie) {
  (void)cookie;
  if (!recording()) return;
  patch_unpatched(true);
  check_stats_layout();
}

AUDIT_EXPORT uintptr_t la_symbind64(ElfW(Sym) * symbol, unsigned int index, uintptr_t* from_cookie,
                                    uintptr_t* to_cookie, unsigned int* flags, const char* name) {
  (void)index;
  *flags |= LA_SYMB_NOPLTENTER | LA_SYMB_NOPLTEXIT;
  if (!recording()) return symbol->st_value;
  struct object* from = object_of(from_cookie);
  struct object* to = object_of(to_cookie);
  if (from == NULL || to == NULL || from->executable) return symbol->st_value;
  int function = function_named(name);
  if (function < 0) return symbol->st_value;
  if (function >= FIRST_EXIT) {  // exit, _exit, _Exit: flush the log first
    if (real[function] == 0) real[function] = symbol->st_value;
    return real[function] == symbol->st_value ? wrapper[function] : symbol->st_value;
  }
  if (!to->executable) return symbol->st_value;
  real[function] = symbol->st_value;
  if (!from->patched) {  // its data slots were bound before its first PLT slot
    patch_data_slots(from->map);
    from->patched = true;
  }
  return wrapper[function];
}
