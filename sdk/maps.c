/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/PID/maps reader. See maps.h.
 */
#include "polyprof/kit/maps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pp_parse_hex_u64(const char **p, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  int n = 0;
  for (;; s++, n++) {
    char c = *s;
    unsigned d;
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else
      break;
    if (n >= 16) return -EINVAL; /* more than 64 bits */
    v = (v << 4) | d;
  }
  if (n == 0) return -EINVAL;
  *p = s;
  *out = v;
  return 0;
}

static int parse_dec(const char **p, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  int n = 0;
  for (; *s >= '0' && *s <= '9'; s++, n++) {
    if (n >= 20 || v > (UINT64_MAX - 9) / 10) return -EINVAL;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  if (n == 0) return -EINVAL;
  *p = s;
  *out = v;
  return 0;
}

static int expect(const char **p, char c) {
  if (**p != c) return -EINVAL;
  (*p)++;
  return 0;
}

int pp_maps_parse_line(const char *line, struct pp_map *m, char *path_buf, size_t path_cap) {
  const char *p = line;
  uint64_t maj, min;
  memset(m, 0, sizeof(*m));
  if (pp_parse_hex_u64(&p, &m->start) || expect(&p, '-') || pp_parse_hex_u64(&p, &m->end) ||
      expect(&p, ' '))
    return -EINVAL;
  if (m->end <= m->start) return -EINVAL;
  if (strlen(p) < 5) return -EINVAL;
  if (p[0] == 'r') m->prot |= PP_MAP_READ;
  if (p[1] == 'w') m->prot |= PP_MAP_WRITE;
  if (p[2] == 'x') m->prot |= PP_MAP_EXEC;
  if (p[3] == 's') m->prot |= PP_MAP_SHARED;
  p += 4;
  if (expect(&p, ' ') || pp_parse_hex_u64(&p, &m->offset) || expect(&p, ' ') ||
      pp_parse_hex_u64(&p, &maj) || expect(&p, ':') || pp_parse_hex_u64(&p, &min) ||
      expect(&p, ' ') || parse_dec(&p, &m->inode))
    return -EINVAL;
  if (maj > UINT32_MAX || min > UINT32_MAX) return -EINVAL;
  m->dev_major = (uint32_t)maj;
  m->dev_minor = (uint32_t)min;
  while (*p == ' ')
    p++;
  size_t n = strcspn(p, "\n");
  if (n == 0 || !path_buf || path_cap == 0) {
    m->path = NULL;
    return 0;
  }
  if (n >= path_cap) n = path_cap - 1;
  memcpy(path_buf, p, n);
  path_buf[n] = '\0';
  m->path = path_buf;
  return 0;
}

static int cmp_map(const void *a, const void *b) {
  const struct pp_map *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

int pp_maps_read(uint32_t pid, int only_exec, size_t max_entries, struct pp_map **out,
                 size_t *count) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f) return errno == ENOENT ? -ESRCH : -errno;
  int rc = pp_maps_read_stream(f, only_exec, max_entries, out, count);
  fclose(f);
  return rc;
}

int pp_maps_read_stream(FILE *f, int only_exec, size_t max_entries, struct pp_map **out,
                        size_t *count) {
  struct pp_map *v = NULL;
  size_t n = 0, cap = 0;
  /* Lines are at most ~80 bytes plus a path (PATH_MAX); a longer one is
   * truncated and its tail skipped below. */
  char line[4352], pbuf[4096];
  int rc = 0;
  while (fgets(line, sizeof(line), f)) {
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] != '\n' && !feof(f)) {
      int c;
      while ((c = fgetc(f)) != EOF && c != '\n') {
      }
    }
    struct pp_map m;
    if (pp_maps_parse_line(line, &m, pbuf, sizeof(pbuf)) < 0) continue;
    if (only_exec && !(m.prot & PP_MAP_EXEC)) continue;
    if (max_entries && n >= max_entries) break;
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 32;
      struct pp_map *g = realloc(v, ncap * sizeof(*g));
      if (!g) {
        rc = -ENOMEM;
        break;
      }
      v = g;
      cap = ncap;
    }
    if (m.path) {
      m.path = strdup(m.path);
      if (!m.path) {
        rc = -ENOMEM;
        break;
      }
    }
    v[n++] = m;
  }
  if (rc < 0) {
    pp_maps_free(v, n);
    return rc;
  }
  /* The kernel prints maps sorted; sort anyway so lookups never depend on it. */
  if (n) qsort(v, n, sizeof(*v), cmp_map);
  *out = v;
  *count = n;
  return 0;
}

void pp_maps_free(struct pp_map *maps, size_t count) {
  if (!maps) return;
  for (size_t i = 0; i < count; i++)
    free(maps[i].path);
  free(maps);
}

long pp_maps_find(const struct pp_map *maps, size_t count, uint64_t addr) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (maps[mid].end <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < count && maps[lo].start <= addr && addr < maps[lo].end) return (long)lo;
  return -1;
}
