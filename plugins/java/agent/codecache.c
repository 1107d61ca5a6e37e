/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What code a pc is in: the nmethods the JVM reported (CompiledMethodLoad,
 * replayed with GenerateEvents at attach) and the interpreter's range
 * (DynamicCodeGenerated "Interpreter").
 *
 * The handler reads the range table without locks: an entry is published by
 * a release store of its start address and retired by storing 0, so a racing
 * reader sees either the whole entry or a free slot (a retired entry read
 * mid-way only misclassifies one sample's leaf).
 *
 * JVMTI does not say which compiler produced an nmethod. HotSpot exports its
 * own field table (gHotSpotVMStructs, the one the serviceability agent uses):
 * from it we take the offsets of CodeBlob::_code_begin, CodeBlob::_size and
 * the compilation level, then find the nmethod header just below the code
 * the event reported. The memory is read with process_vm_readv on ourselves,
 * which fails with EFAULT instead of crashing on an unmapped page, so a wrong
 * offset costs the level (shown as _[j]), never the JVM.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent.h"

struct nm {
  _Atomic uintptr_t start; /* 0: free */
  uintptr_t end;
  jmethodID method;
  int level;
};

static struct nm *nms;
static size_t nm_cap;
static _Atomic size_t nm_high; /* entries [0, nm_high) may be in use */
static _Atomic uintptr_t interp_start, interp_end;

int ja_codecache_init(size_t max_nmethods) {
  nms = calloc(max_nmethods, sizeof(*nms));
  if (!nms) return -ENOMEM;
  nm_cap = max_nmethods;
  return 0;
}

void ja_codecache_add(jmethodID m, const void *addr, jint size, int level) {
  if (!addr || size <= 0) return;
  size_t high = atomic_load(&nm_high);
  for (size_t i = 0; i < nm_cap; i++) {
    if (atomic_load(&nms[i].start)) continue;
    nms[i].end = (uintptr_t)addr + (uintptr_t)size;
    nms[i].method = m;
    nms[i].level = level;
    atomic_store_explicit(&nms[i].start, (uintptr_t)addr, memory_order_release);
    if (i >= high) atomic_store(&nm_high, i + 1);
    return;
  }
  /* table full: samples in this nmethod get default types */
}

void ja_codecache_remove(jmethodID m, const void *addr) {
  size_t high = atomic_load(&nm_high);
  for (size_t i = 0; i < high; i++)
    if (atomic_load(&nms[i].start) == (uintptr_t)addr && nms[i].method == m) {
      atomic_store(&nms[i].start, 0);
      return;
    }
}

void ja_codecache_set_interpreter(const void *addr, jint size) {
  atomic_store(&interp_end, (uintptr_t)addr + (uintptr_t)size);
  atomic_store(&interp_start, (uintptr_t)addr);
}

int ja_codecache_lookup(uintptr_t pc, jmethodID *root, int *level) {
  uintptr_t is = atomic_load_explicit(&interp_start, memory_order_relaxed);
  if (is && pc >= is && pc < atomic_load_explicit(&interp_end, memory_order_relaxed)) return 2;
  size_t high = atomic_load_explicit(&nm_high, memory_order_acquire);
  for (size_t i = 0; i < high; i++) {
    uintptr_t s = atomic_load_explicit(&nms[i].start, memory_order_acquire);
    if (s && pc >= s && pc < nms[i].end) {
      *root = nms[i].method;
      *level = nms[i].level;
      return 1;
    }
  }
  return 0;
}

/* ---- dump-time index: method -> best live level ---- */
static struct {
  jmethodID m;
  int level;
} * lvl_tab;
static size_t lvl_cap;

void ja_codecache_index_methods(void) {
  size_t high = atomic_load(&nm_high);
  size_t cap = 64;
  while (cap < high * 2)
    cap *= 2;
  if (cap > lvl_cap) {
    free(lvl_tab);
    lvl_tab = calloc(cap, sizeof(*lvl_tab));
    lvl_cap = lvl_tab ? cap : 0;
  }
  if (!lvl_tab) return;
  memset(lvl_tab, 0, lvl_cap * sizeof(*lvl_tab));
  for (size_t i = 0; i < high; i++) {
    if (!atomic_load(&nms[i].start)) continue;
    jmethodID m = nms[i].method;
    size_t h = ((uintptr_t)m >> 3) * 0x9E3779B97F4A7C15ull >> 20;
    for (size_t k = 0; k < lvl_cap; k++) {
      size_t j = (h + k) & (lvl_cap - 1);
      if (!lvl_tab[j].m) {
        lvl_tab[j].m = m;
        lvl_tab[j].level = nms[i].level;
        break;
      }
      if (lvl_tab[j].m == m) {
        /* the best tier wins: a C2 version replaces the C1 one */
        if (nms[i].level == 4 || (lvl_tab[j].level != 4 && nms[i].level > lvl_tab[j].level))
          lvl_tab[j].level = nms[i].level;
        break;
      }
    }
  }
}

int ja_codecache_method_level(jmethodID m) {
  if (!lvl_tab || !m) return -1;
  size_t h = ((uintptr_t)m >> 3) * 0x9E3779B97F4A7C15ull >> 20;
  for (size_t k = 0; k < lvl_cap; k++) {
    size_t j = (h + k) & (lvl_cap - 1);
    if (!lvl_tab[j].m) return -1;
    if (lvl_tab[j].m == m) return lvl_tab[j].level;
  }
  return -1;
}

/* ---- compilation level through VMStructs ---- */
static long off_code_begin = -1, off_size = -1, off_level = -1;

static int read_self(void *dst, uintptr_t src, size_t len) {
  struct iovec local = {dst, len}, remote = {(void *)src, len};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

static uint64_t sym_u64(const char *name) {
  uint64_t *p = dlsym(RTLD_DEFAULT, name);
  return p ? *p : (uint64_t)-1;
}

int ja_codecache_vmstructs_init(void) {
  char **table_ptr = dlsym(RTLD_DEFAULT, "gHotSpotVMStructs");
  uint64_t o_type = sym_u64("gHotSpotVMStructEntryTypeNameOffset");
  uint64_t o_field = sym_u64("gHotSpotVMStructEntryFieldNameOffset");
  uint64_t o_static = sym_u64("gHotSpotVMStructEntryIsStaticOffset");
  uint64_t o_off = sym_u64("gHotSpotVMStructEntryOffsetOffset");
  uint64_t stride = sym_u64("gHotSpotVMStructEntryArrayStride");
  if (!table_ptr || !*table_ptr || o_type > 64 || o_field > 64 || o_static > 64 || o_off > 64 ||
      stride == 0 || stride > 128)
    return 0;
  const char *e = *table_ptr;
  for (int i = 0; i < 100000; i++, e += stride) {
    const char *type = *(const char *const *)(e + o_type);
    const char *field = *(const char *const *)(e + o_field);
    if (!type) break;
    if (!field || *(const int32_t *)(e + o_static)) continue;
    long off = (long)*(const uint64_t *)(e + o_off);
    if (strcmp(type, "CodeBlob") == 0 && strcmp(field, "_code_begin") == 0) off_code_begin = off;
    if (strcmp(type, "CodeBlob") == 0 && strcmp(field, "_size") == 0) off_size = off;
    if ((strcmp(type, "nmethod") == 0 || strcmp(type, "CompiledMethod") == 0) &&
        strcmp(field, "_comp_level") == 0)
      off_level = off;
  }
  return off_code_begin >= 0 && off_size >= 0 && off_level >= 0;
}

int ja_codecache_level_of(const void *code_addr) {
  if (off_code_begin < 0 || off_size < 0 || off_level < 0) return 0;
  enum { CHUNK = 4096, CHUNKS = 16 };
  static unsigned char buf[CHUNK * CHUNKS]; /* callers hold the agent lock */
  uintptr_t top = (uintptr_t)code_addr & ~(uintptr_t)7;
  long maxoff = off_code_begin > off_size ? off_code_begin : off_size;
  if (off_level > maxoff) maxoff = off_level;
  size_t have = 0; /* bytes readable just below top */
  for (int c = 1; c <= CHUNKS; c++) {
    if (read_self(buf + sizeof(buf) - (size_t)c * CHUNK, top - (uintptr_t)c * CHUNK, CHUNK) != 0)
      break;
    have = (size_t)c * CHUNK;
  }
  /* the nmethod header lies below its code: try the nearest candidates first */
  for (size_t back = 8; back <= have; back += 8) {
    uintptr_t cand = top - back;
    if ((long)back < maxoff + 8) continue; /* fields must lie below the code */
    size_t at = sizeof(buf) - back;
    uintptr_t cb;
    int32_t size, level;
    memcpy(&cb, buf + at + off_code_begin, sizeof(cb));
    if (cb != (uintptr_t)code_addr) continue;
    memcpy(&size, buf + at + off_size, sizeof(size));
    memcpy(&level, buf + at + off_level, sizeof(level));
    if (size <= 0 || (uintptr_t)size < (uintptr_t)code_addr - cand || level < 0 || level > 4)
      continue;
    return level;
  }
  return 0;
}
