/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Method address map: a flat array of ranges sorted on demand (additions
 * come in bursts at rundown; lookups come in one burst per snapshot), with
 * names in one growing arena. Both are capped; hitting a cap clears the map,
 * which the next rundown refills, instead of growing without bound.
 *
 * ReadyToRun code first run after attach is known only by its entry point
 * (R2RGetEntryPoint carries no size): such an entry is "open" and, at each
 * sort, reaches to the next known start, at most DOTNET_R2R_MAX_EXTENT.
 * Every R2R method that runs has its entry point looked up once (that is
 * where the runtime applies its fixups), and a method's funclets follow its
 * body: the extent covers the method and any never-called code up to the
 * next method bound, which no sampled address can be in. The cap keeps a
 * method unbound by mistake from borrowing a far neighbour's name.
 */
#include "methods.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nettrace.h"

struct range {
  uint64_t start;
  uint32_t size; /* for an open entry: its extent at the last sort */
  uint32_t name; /* offset in names; OPEN_BIT: the size is inferred */
  uint64_t seq;  /* insertion order: the newest load of a start wins */
};

#define OPEN_BIT 0x80000000u
#define NAME_MAX_BYTES (OPEN_BIT - 1) /* name offsets stay below OPEN_BIT */

struct dotnet_methods {
  struct range *r;
  uint32_t n, cap, max;
  char *names;
  uint32_t names_used, names_cap, names_max;
  uint64_t seq, resets;
  bool sorted;
};

struct dotnet_methods *dotnet_methods_new(uint32_t max_methods, uint32_t max_name_bytes) {
  struct dotnet_methods *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->max = max_methods < 16 ? 16 : max_methods;
  m->names_max = max_name_bytes < 4096 ? 4096 : max_name_bytes;
  if (m->names_max > NAME_MAX_BYTES) m->names_max = NAME_MAX_BYTES;
  m->sorted = true;
  return m;
}

void dotnet_methods_free(struct dotnet_methods *m) {
  if (!m) return;
  free(m->r);
  free(m->names);
  free(m);
}

static void clear(struct dotnet_methods *m) {
  m->n = 0;
  m->names_used = 0;
  m->sorted = true;
  m->resets++;
}

static int add(struct dotnet_methods *m, uint64_t start, uint32_t size, bool open,
               const char *name) {
  size_t len = strlen(name) + 1;
  if (len > 1024) len = 1024;
  if (m->n == m->max || m->names_used + len > m->names_max) clear(m);
  if (m->n == m->cap) {
    uint32_t ncap = m->cap ? m->cap * 2 : 1024;
    if (ncap > m->max) ncap = m->max;
    struct range *g = realloc(m->r, (size_t)ncap * sizeof(*g));
    if (!g) return -ENOMEM;
    m->r = g;
    m->cap = ncap;
  }
  if (m->names_used + len > m->names_cap) {
    uint32_t ncap = m->names_cap ? m->names_cap : 64 * 1024;
    while (ncap < m->names_used + len)
      ncap *= 2;
    if (ncap > m->names_max) ncap = m->names_max;
    char *g = realloc(m->names, ncap);
    if (!g) return -ENOMEM;
    m->names = g;
    m->names_cap = ncap;
  }
  memcpy(m->names + m->names_used, name, len - 1);
  m->names[m->names_used + len - 1] = '\0';
  m->r[m->n++] = (struct range){start, size, m->names_used | (open ? OPEN_BIT : 0), m->seq++};
  m->names_used += (uint32_t)len;
  m->sorted = false;
  return 0;
}

int dotnet_methods_add(struct dotnet_methods *m, uint64_t start, uint32_t size, const char *name) {
  if (size == 0 || start + size < start) return -EINVAL;
  return add(m, start, size, false, name);
}

int dotnet_methods_add_entry(struct dotnet_methods *m, uint64_t start, const char *name) {
  if (start == 0 || start + DOTNET_R2R_MAX_EXTENT < start) return -EINVAL;
  return add(m, start, 0, true, name);
}

/* "Ns.Type" + "Method" as the runtime's method events spell a method:
 * MethodNamespace is the full type name (nested types "+Inner", generic
 * instantiations "List`1[System.Int32]"). */
static void join_name(char *out, size_t cap, const char *ns, const char *name) {
  if (ns[0])
    snprintf(out, cap, "%s.%s", ns, name);
  else
    snprintf(out, cap, "%s", name);
}

int dotnet_methods_add_event(struct dotnet_methods *m, const uint8_t *p, uint32_t len) {
  /* u64 MethodID, u64 ModuleID, u64 MethodStartAddress, u32 MethodSize,
   * u32 MethodToken, u32 MethodFlags, then UTF-16z namespace, name, signature */
  if (len < 36) return -EINVAL;
  uint64_t start = 0;
  uint32_t size = 0;
  for (int i = 7; i >= 0; i--)
    start = (start << 8) | p[16 + i];
  for (int i = 3; i >= 0; i--)
    size = (size << 8) | p[24 + i];
  char ns[512], name[256], full[1024];
  long a = dotnet_utf16z_to_utf8(p + 36, len - 36, ns, sizeof(ns));
  if (a < 0) return -EINVAL;
  long b = dotnet_utf16z_to_utf8(p + 36 + a, len - 36 - (size_t)a, name, sizeof(name));
  if (b < 0) return -EINVAL;
  join_name(full, sizeof(full), ns, name);
  return dotnet_methods_add(m, start, size, full);
}

int dotnet_methods_add_r2r_event(struct dotnet_methods *m, const uint8_t *p, uint32_t len) {
  /* u64 MethodID, UTF-16z namespace, name, signature, u64 EntryPoint,
   * u16 ClrInstanceID */
  if (len < 8) return -EINVAL;
  char ns[512], name[256], sig[8], full[1024];
  size_t off = 8;
  long a = dotnet_utf16z_to_utf8(p + off, len - off, ns, sizeof(ns));
  if (a < 0) return -EINVAL;
  off += (size_t)a;
  long b = dotnet_utf16z_to_utf8(p + off, len - off, name, sizeof(name));
  if (b < 0) return -EINVAL;
  off += (size_t)b;
  long c = dotnet_utf16z_to_utf8(p + off, len - off, sig, sizeof(sig));
  if (c < 0 || len - off - (size_t)c < 8) return -EINVAL;
  off += (size_t)c;
  uint64_t entry = 0;
  for (int i = 7; i >= 0; i--)
    entry = (entry << 8) | p[off + (size_t)i];
  join_name(full, sizeof(full), ns, name);
  return dotnet_methods_add_entry(m, entry, full);
}

static int cmp_range(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void sort_map(struct dotnet_methods *m) {
  qsort(m->r, m->n, sizeof(*m->r), cmp_range);
  /* keep only the newest entry per start address, except that an open
   * entry (an R2R entry point) does not replace a sized range of the same
   * start: that is the same precompiled method, whose size the rundown gave */
  uint32_t w = 0;
  for (uint32_t i = 0; i < m->n; i++) {
    if (w > 0 && m->r[w - 1].start == m->r[i].start) {
      if (!(m->r[i].name & OPEN_BIT) || (m->r[w - 1].name & OPEN_BIT)) m->r[w - 1] = m->r[i];
    } else {
      m->r[w++] = m->r[i];
    }
  }
  m->n = w;
  for (uint32_t i = 0; i < m->n; i++) {
    if (!(m->r[i].name & OPEN_BIT)) continue;
    uint64_t extent = DOTNET_R2R_MAX_EXTENT;
    if (i + 1 < m->n && m->r[i + 1].start - m->r[i].start < extent)
      extent = m->r[i + 1].start - m->r[i].start;
    m->r[i].size = (uint32_t)extent;
  }
  m->sorted = true;
}

const char *dotnet_methods_lookup(struct dotnet_methods *m, uint64_t ip) {
  if (!m->sorted) sort_map(m);
  uint32_t lo = 0, hi = m->n;
  while (lo < hi) { /* first range with start > ip */
    uint32_t mid = lo + (hi - lo) / 2;
    if (m->r[mid].start <= ip)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return NULL;
  const struct range *r = &m->r[lo - 1];
  if (ip - r->start >= r->size) return NULL;
  return m->names + (r->name & ~OPEN_BIT);
}

uint32_t dotnet_methods_count(const struct dotnet_methods *m) {
  return m->n;
}
uint64_t dotnet_methods_resets(const struct dotnet_methods *m) {
  return m->resets;
}
