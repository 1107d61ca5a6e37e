/* SPDX-License-Identifier: Apache-2.0 */
/*
 * perf-<pid>.map loader. See perfmap.h.
 */
#include "polyprof/kit/perfmap.h"
#include "polyprof/kit/maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pmap_ent {
  uint64_t start, end;
  uint32_t name; /* offset into blob */
  uint32_t seq;  /* line number: later lines win */
};

struct pp_perfmap {
  struct pmap_ent *e;
  size_t n;
  char *blob;
  size_t blob_len;
  /* maps built entry by entry (pp_perfmap_new) */
  size_t e_cap, blob_cap;
  uint32_t next_seq;
};

/* perf maps are written with and without the 0x prefix */
static int hexval(const char **p, uint64_t *out) {
  if ((*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X')) *p += 2;
  return pp_parse_hex_u64(p, out);
}

static int cmp_ent(const void *a, const void *b) {
  const struct pmap_ent *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int pp_perfmap_parse(const char *text, size_t len, size_t max_entries, struct pp_perfmap **out) {
  struct pp_perfmap *m = calloc(1, sizeof(*m));
  if (!m) return -ENOMEM;
  /* names are copied into a blob no bigger than the text itself */
  m->blob = malloc(len + 1);
  size_t cap = 0;
  if (!m->blob) {
    free(m);
    return -ENOMEM;
  }
  const char *p = text, *end = text + len;
  uint32_t seq = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    /* a line without newline at EOF may be half-written by the JIT: skip it */
    if (!nl) break;
    const char *q = p;
    uint64_t start, size;
    char tmp[40];
    size_t tl = (size_t)(le - q) < sizeof(tmp) - 1 ? (size_t)(le - q) : sizeof(tmp) - 1;
    memcpy(tmp, q, tl);
    tmp[tl] = '\0';
    const char *t = tmp;
    if (hexval(&t, &start) == 0 && *t == ' ' && (t++, hexval(&t, &size) == 0) && *t == ' ' &&
        size > 0 && start + size > start) {
      const char *name = q + (t - tmp) + 1;
      size_t nlen = (size_t)(le - name);
      while (nlen > 0 && (name[nlen - 1] == '\r' || name[nlen - 1] == ' '))
        nlen--;
      if (nlen > 0 && (!max_entries || m->n < max_entries)) {
        if (m->n == cap) {
          size_t ncap = cap ? cap * 2 : 256;
          struct pmap_ent *g = realloc(m->e, ncap * sizeof(*g));
          if (!g) {
            pp_perfmap_free(m);
            return -ENOMEM;
          }
          m->e = g;
          cap = ncap;
        }
        memcpy(m->blob + m->blob_len, name, nlen);
        m->blob[m->blob_len + nlen] = '\0';
        m->e[m->n++] = (struct pmap_ent){
            .start = start, .end = start + size, .name = (uint32_t)m->blob_len, .seq = seq};
        m->blob_len += nlen + 1;
      }
    }
    seq++;
    p = le + 1;
  }
  if (m->n) qsort(m->e, m->n, sizeof(*m->e), cmp_ent);
  *out = m;
  return 0;
}

int pp_perfmap_load_fd(int fd, size_t max_bytes, size_t max_entries, struct pp_perfmap **out) {
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) return -EINVAL;
  size_t want = (size_t)st.st_size;
  if (max_bytes && want > max_bytes) want = max_bytes;
  if (want > UINT32_MAX - 1) want = UINT32_MAX - 1;
  char *buf = malloc(want + 1);
  if (!buf) return -ENOMEM;
  size_t got = 0;
  while (got < want) {
    ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  int rc = pp_perfmap_parse(buf, got, max_entries, out);
  free(buf);
  return rc;
}

int pp_perfmap_load(const char *path, size_t max_bytes, size_t max_entries,
                    struct pp_perfmap **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -errno;
  int rc = pp_perfmap_load_fd(fd, max_bytes, max_entries, out);
  close(fd);
  return rc;
}

void pp_perfmap_free(struct pp_perfmap *m) {
  if (!m) return;
  free(m->e);
  free(m->blob);
  free(m);
}

const char *pp_perfmap_lookup(const struct pp_perfmap *m, uint64_t addr, uint64_t *start) {
  if (!m || m->n == 0) return NULL;
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->e[mid].start <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Walk back over a few entries: among those containing addr, the latest
   * line wins (recompiled code). Bounded so a hostile file cannot make a
   * lookup linear. */
  const struct pmap_ent *best = NULL;
  for (size_t i = lo, steps = 0; i > 0 && steps < 16; i--, steps++) {
    const struct pmap_ent *e = &m->e[i - 1];
    if (addr < e->end && (!best || e->seq > best->seq)) best = e;
  }
  if (!best) return NULL;
  if (start) *start = best->start;
  return m->blob + best->name;
}

size_t pp_perfmap_count(const struct pp_perfmap *m) {
  return m ? m->n : 0;
}

size_t pp_perfmap_bytes(const struct pp_perfmap *m) {
  return m ? sizeof(*m) + m->n * sizeof(struct pmap_ent) + m->blob_len : 0;
}

/* ---- building a map entry by entry (the jitdump reader) ---- */

struct pp_perfmap *pp_perfmap_new(void) {
  return calloc(1, sizeof(struct pp_perfmap));
}

static int add_entry(struct pp_perfmap *m, uint64_t start, uint64_t size, uint32_t name) {
  if (size == 0 || start + size < start || m->next_seq == UINT32_MAX) return -EINVAL;
  if (m->n >= m->e_cap) {
    size_t ncap = m->n >= 128 ? m->n * 2 : 256;
    struct pmap_ent *g = realloc(m->e, ncap * sizeof(*g));
    if (!g) return -ENOMEM;
    m->e = g;
    m->e_cap = ncap;
  }
  m->e[m->n++] =
      (struct pmap_ent){.start = start, .end = start + size, .name = name, .seq = m->next_seq++};
  return 0;
}

int64_t pp_perfmap_add(struct pp_perfmap *m, uint64_t start, uint64_t size, const char *name,
                       size_t nlen) {
  if (!m || nlen == 0 || size == 0 || start + size < start) return -EINVAL;
  /* name offsets are 32-bit */
  if (nlen >= UINT32_MAX - 1 || m->blob_len > UINT32_MAX - 2 - nlen) return -E2BIG;
  if (m->blob_len + nlen + 1 > m->blob_cap) {
    size_t ncap = m->blob_cap ? m->blob_cap : 4096;
    while (ncap < m->blob_len + nlen + 1)
      ncap *= 2;
    char *g = realloc(m->blob, ncap);
    if (!g) return -ENOMEM;
    m->blob = g;
    m->blob_cap = ncap;
  }
  uint32_t ref = (uint32_t)m->blob_len;
  memcpy(m->blob + ref, name, nlen);
  m->blob[ref + nlen] = '\0';
  int rc = add_entry(m, start, size, ref);
  if (rc < 0) return rc;
  m->blob_len += nlen + 1;
  return ref;
}

int pp_perfmap_add_ref(struct pp_perfmap *m, uint64_t start, uint64_t size, uint32_t name_ref) {
  if (!m || name_ref >= m->blob_len) return -EINVAL;
  return add_entry(m, start, size, name_ref);
}

void pp_perfmap_seal(struct pp_perfmap *m) {
  if (m && m->n) qsort(m->e, m->n, sizeof(*m->e), cmp_ent);
}
