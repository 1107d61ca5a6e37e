/*
 * Method address map: a flat array of ranges sorted on demand (additions
 * come in bursts at rundown; lookups come in one burst per snapshot), with
 * names in one growing arena. Both are capped; hitting a cap clears the map,
 * which the next rundown refills, instead of growing without bound.
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
  uint32_t size;
  uint32_t name; /* offset in names */
  uint64_t seq;  /* insertion order: the newest load of a start wins */
};

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

int dotnet_methods_add(struct dotnet_methods *m, uint64_t start, uint32_t size, const char *name) {
  size_t len = strlen(name) + 1;
  if (len > 1024) len = 1024;
  if (size == 0 || start + size < start) return -EINVAL;
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
  m->r[m->n++] = (struct range){start, size, m->names_used, m->seq++};
  m->names_used += (uint32_t)len;
  m->sorted = false;
  return 0;
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
  /* MethodNamespace is the full type name: "Ns.Type" (+ nested "+Inner") */
  if (ns[0])
    snprintf(full, sizeof(full), "%s.%s", ns, name);
  else
    snprintf(full, sizeof(full), "%s", name);
  return dotnet_methods_add(m, start, size, full);
}

static int cmp_range(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void sort_map(struct dotnet_methods *m) {
  qsort(m->r, m->n, sizeof(*m->r), cmp_range);
  /* keep only the newest entry per start address */
  uint32_t w = 0;
  for (uint32_t i = 0; i < m->n; i++) {
    if (w > 0 && m->r[w - 1].start == m->r[i].start)
      m->r[w - 1] = m->r[i];
    else
      m->r[w++] = m->r[i];
  }
  m->n = w;
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
  return m->names + r->name;
}

uint32_t dotnet_methods_count(const struct dotnet_methods *m) {
  return m->n;
}
uint64_t dotnet_methods_resets(const struct dotnet_methods *m) {
  return m->resets;
}
