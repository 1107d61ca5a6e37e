/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Code objects of the targets, cached by (pid, address).
 *
 * A sample names each frame by its code object pointer; turning that into a
 * name, a file and a line table costs several reads, so it is done once per
 * code object and kept in a bounded set-associative cache (python.code_cache
 * entries, 4 ways, least recently used way evicted). A code object can be
 * freed and another allocated at the same address: every entry is
 * re-validated (type, name and file pointers, first line) once per cache
 * generation, i.e. once per session, which bounds how long a stale name can
 * survive; on 3.14+ also whenever the target's count of freed code objects
 * moved (py_proc.code_epoch). The only allocation is on a miss.
 *
 * Frames hold pointers to entries until the sample they belong to is
 * handed on, so an entry used since the current sample began (the
 * process's walk, its asyncio chains and waiting tasks included) is never
 * the one evicted: a set whose ways are all in use by this sample caches
 * nothing more, and the frame that needed it fails the walk (counted as a
 * failed sample) rather than renaming a frame already read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "python.h"

#define WAYS 4

struct py_codecache {
  struct py_code *slots; /* nsets * WAYS */
  size_t nsets;
  uint32_t gen;
  uint64_t clock;
  uint64_t sample_from; /* entries used at or after this clock value are pinned */
  uint64_t hits, misses, evictions;
};

struct py_codecache *python_codecache_new(size_t entries) {
  struct py_codecache *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  size_t sets = 1;
  while (sets * WAYS < entries)
    sets *= 2;
  c->nsets = sets;
  c->slots = calloc(sets * WAYS, sizeof(*c->slots));
  if (!c->slots) {
    free(c);
    return NULL;
  }
  c->gen = 1;
  return c;
}

static void drop(struct py_code *e) {
  free(e->blob);
  memset(e, 0, sizeof(*e));
}

void python_codecache_free(struct py_codecache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->nsets * WAYS; i++)
    free(c->slots[i].blob);
  free(c->slots);
  free(c);
}

void python_codecache_new_gen(struct py_codecache *c) {
  c->gen++;
}

void python_codecache_begin_sample(struct py_codecache *c) {
  c->sample_from = ++c->clock;
}

void python_codecache_forget_pid(struct py_codecache *c, uint32_t pid) {
  for (size_t i = 0; i < c->nsets * WAYS; i++)
    if (c->slots[i].addr && c->slots[i].pid == pid) drop(&c->slots[i]);
}

void python_codecache_stats(struct py_codecache *c, uint64_t *hits, uint64_t *misses,
                            uint64_t *evictions) {
  *hits = c->hits;
  *misses = c->misses;
  *evictions = c->evictions;
  c->hits = c->misses = c->evictions = 0;
}

static uint64_t rd64(const uint8_t *b, size_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

static bool plausible_ptr(uint64_t p) {
  return p >= 4096 && p < (1ull << 47) && (p & 7) == 0;
}

/* Appends code point cp as UTF-8; false when out of room. */
static bool put_utf8(char *out, size_t cap, size_t *n, uint32_t cp) {
  char b[4];
  size_t k;
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd; /* lone surrogates */
  if (cp > 0x10ffff) cp = 0xfffd;
  if (cp < 0x80) {
    b[0] = (char)cp, k = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xc0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 63)), k = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xe0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 63));
    b[2] = (char)(0x80 | (cp & 63)), k = 3;
  } else {
    b[0] = (char)(0xf0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 63));
    b[2] = (char)(0x80 | ((cp >> 6) & 63)), b[3] = (char)(0x80 | (cp & 63)), k = 4;
  }
  if (*n + k + 1 > cap) return false;
  memcpy(out + *n, b, k);
  *n += k;
  return true;
}

int python_read_string(const struct py_proc *p, uint64_t addr, char *out, size_t cap) {
  if (cap == 0) return -EINVAL;
  out[0] = '\0';
  if (!plausible_ptr(addr)) return -EFAULT;
  uint8_t hdr[96];
  if (p->off.str_kind == PY_STR_BYTES27) {
    /* PyStringObject: raw bytes, shown as they are (usually UTF-8) */
    int rc = pp_remote_read((pid_t)p->pid, addr, hdr, 40);
    if (rc < 0) return rc;
    int64_t size = (int64_t)rd64(hdr, 16);
    if (size < 0 || size > 1 << 20) return -EINVAL;
    size_t n = (size_t)size < cap - 1 ? (size_t)size : cap - 1;
    rc = pp_remote_read((pid_t)p->pid, addr + 36, out, n);
    if (rc < 0) return rc;
    for (size_t i = 0; i < n; i++)
      if (out[i] == '\0') out[i] = '?';
    out[n] = '\0';
    return (int)n;
  }
  /* 3.14+: header positions from _Py_DebugOffsets (a free-threaded
   * build's object header is 32 bytes, and its kind bits start at 8) */
  const struct py_offsets *o = &p->off;
  size_t ascii_size = o->str_ascii_hdr                   ? o->str_ascii_hdr
                      : o->str_kind == PY_STR_UNICODE312 ? 40
                                                         : 48;
  size_t compact_size = o->str_compact_hdr                 ? o->str_compact_hdr
                        : o->str_kind == PY_STR_UNICODE312 ? 56
                                                           : 72;
  size_t len_at = o->str_length ? o->str_length : 16, state_at = o->str_state ? o->str_state : 32;
  unsigned shift = o->str_kind_shift ? o->str_kind_shift : 2;
  if (compact_size + 8 > sizeof(hdr) || len_at + 8 > compact_size || state_at + 4 > ascii_size)
    return -EINVAL;
  int rc = pp_remote_read((pid_t)p->pid, addr, hdr, compact_size + 8);
  if (rc < 0) return rc;
  int64_t length = (int64_t)rd64(hdr, len_at);
  uint32_t state;
  memcpy(&state, hdr + state_at, 4);
  unsigned kind = (state >> shift) & 7, compact = (state >> (shift + 3)) & 1,
           ascii = (state >> (shift + 4)) & 1;
  if (length < 0 || length > 1 << 20 || (kind != 1 && kind != 2 && kind != 4)) return -EINVAL;
  if (ascii && kind != 1) return -EINVAL;
  uint64_t data;
  if (compact)
    data = addr + (ascii ? ascii_size : compact_size);
  else {
    data = rd64(hdr, compact_size); /* legacy PyUnicodeObject: data.any */
    if (!plausible_ptr(data)) return -EINVAL;
  }
  /* At most cap-1 code points can fit; read no more than that. */
  size_t chars = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
  uint8_t raw[PY_NAME_MAX * 4];
  if (chars * kind > sizeof(raw)) chars = sizeof(raw) / kind;
  rc = pp_remote_read((pid_t)p->pid, data, raw, chars * kind);
  if (rc < 0) return rc;
  size_t n = 0;
  for (size_t i = 0; i < chars; i++) {
    uint32_t cp;
    if (kind == 1)
      cp = raw[i];
    else if (kind == 2) {
      uint16_t v;
      memcpy(&v, raw + 2 * i, 2);
      cp = v;
    } else
      memcpy(&cp, raw + 4 * i, 4);
    if (cp == 0) cp = '?';
    if (!put_utf8(out, cap, &n, cp)) break;
  }
  out[n] = '\0';
  return (int)n;
}

/* Bytes of a bytes object (2.7: str) into a fresh buffer; bounded. */
static int read_bytes(const struct py_proc *p, uint64_t addr, uint8_t **out, uint32_t *len) {
  *out = NULL;
  *len = 0;
  if (!plausible_ptr(addr)) return -EFAULT;
  uint8_t hdr[8];
  uint32_t size_at = p->off.bytes_ob_size ? p->off.bytes_ob_size : 16;
  int rc = pp_remote_read((pid_t)p->pid, addr + size_at, hdr, sizeof(hdr));
  if (rc < 0) return rc;
  int64_t size = (int64_t)rd64(hdr, 0);
  if (size < 0) return -EINVAL;
  if (size > PY_LINETABLE_MAX) return 0; /* absurd table: lines fall back to the first */
  uint64_t sval = addr + (p->off.bytes_sval                   ? p->off.bytes_sval
                          : p->off.str_kind == PY_STR_BYTES27 ? 36
                                                              : 32);
  uint8_t *b = malloc(size ? (size_t)size : 1);
  if (!b) return -ENOMEM;
  rc = pp_remote_read((pid_t)p->pid, sval, b, (size_t)size);
  if (rc < 0) {
    free(b);
    return rc;
  }
  *out = b;
  *len = (uint32_t)size;
  return 0;
}

/* The fields that identify a code object (to re-validate a cached entry). */
struct code_id {
  uint64_t type, name, file, qual, lt;
  int32_t first;
};

static int read_code_id(const struct py_proc *p, uint64_t addr, struct code_id *id) {
  uint8_t buf[PY_CODE_READ_MAX];
  if (p->off.co_read > sizeof(buf)) return -EINVAL;
  int rc = pp_remote_read((pid_t)p->pid, addr, buf, p->off.co_read);
  if (rc < 0) return rc;
  id->type = rd64(buf, p->off.ob_type ? p->off.ob_type : 8);
  id->name = rd64(buf, p->off.co_name);
  id->file = rd64(buf, p->off.co_filename);
  id->qual = p->off.co_qualname ? rd64(buf, p->off.co_qualname) : 0;
  id->lt = rd64(buf, p->off.co_linetable);
  memcpy(&id->first, buf + p->off.co_firstlineno, 4);
  if (p->pycode_type && id->type != p->pycode_type) return -EINVAL; /* not a code object */
  if (!plausible_ptr(id->name) || !plausible_ptr(id->file)) return -EINVAL;
  if (id->first < 0 || id->first > 10000000) return -EINVAL;
  return 0;
}

/* Fingerprint of the identifying fields (stored in the entry). */
static uint64_t id_hash(const struct code_id *id) {
  uint64_t h = 1469598103934665603ull;
  uint64_t v[] = {id->type, id->name, id->file, id->qual, id->lt, (uint64_t)(uint32_t)id->first};
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
    h = (h ^ v[i]) * 1099511628211ull;
  return h;
}

static int fill(const struct py_proc *p, struct py_code *e, uint64_t addr,
                const struct code_id *id) {
  char name[PY_NAME_MAX], file[PY_NAME_MAX];
  int rc = -1;
  if (id->qual) rc = python_read_string(p, id->qual, name, sizeof(name));
  if (rc <= 0) rc = python_read_string(p, id->name, name, sizeof(name));
  if (rc < 0) return rc;
  rc = python_read_string(p, id->file, file, sizeof(file));
  if (rc < 0) return rc;
  uint8_t *lt = NULL;
  uint32_t ltlen = 0;
  rc = read_bytes(p, id->lt, &lt, &ltlen);
  if (rc < 0) return rc;
  size_t nl = strlen(name) + 1, fl = strlen(file) + 1;
  char *blob = malloc(nl + fl + ltlen + 1);
  if (!blob) {
    free(lt);
    return -ENOMEM;
  }
  memcpy(blob, name, nl);
  memcpy(blob + nl, file, fl);
  if (ltlen) memcpy(blob + nl + fl, lt, ltlen);
  free(lt);
  free(e->blob);
  memset(e, 0, sizeof(*e));
  e->blob = blob;
  e->name = blob;
  e->file = blob + nl;
  e->lt = ltlen ? (uint8_t *)blob + nl + fl : NULL;
  e->lt_len = ltlen;
  e->addr = addr;
  e->pid = p->pid;
  e->firstlineno = id->first;
  e->memo_addrq[0] = e->memo_addrq[1] = INT64_MIN;
  return 0;
}

struct py_code *python_code_get(struct py_codecache *c, const struct py_proc *p, uint64_t addr,
                                int *err) {
  *err = 0;
  if (!plausible_ptr(addr)) {
    *err = -EFAULT;
    return NULL;
  }
  uint64_t h = (addr >> 4) * 0x9e3779b97f4a7c15ull ^ p->pid;
  struct py_code *set = &c->slots[(h >> 20) & (c->nsets - 1)];
  c->clock++;
  struct py_code *victim = NULL;
  for (int i = 0; i < WAYS; i++) {
    struct py_code *e = &set[i];
    if (e->addr == addr && e->pid == p->pid) {
      if (e->gen != c->gen || e->epoch != p->code_epoch) {
        /* first use this session, or code objects were freed since (3.14+):
         * is it still the same code object? */
        struct code_id id;
        int rc = read_code_id(p, addr, &id);
        if (rc < 0) {
          drop(e);
          *err = rc;
          return NULL;
        }
        if (id_hash(&id) != e->fp) {
          rc = fill(p, e, addr, &id);
          if (rc < 0) {
            drop(e);
            *err = rc;
            return NULL;
          }
          e->fp = id_hash(&id);
        }
        e->gen = c->gen;
        e->epoch = p->code_epoch;
      }
      e->last_used = c->clock;
      c->hits++;
      return e;
    }
    if (e->addr && e->last_used >= c->sample_from) continue; /* in this sample's frames */
    if (!victim || (victim->addr && (!e->addr || e->last_used < victim->last_used))) victim = e;
  }
  c->misses++;
  if (!victim) {
    *err = -ENOSPC;
    return NULL;
  }
  struct code_id id;
  int rc = read_code_id(p, addr, &id);
  if (rc < 0) {
    *err = rc;
    return NULL;
  }
  if (victim->addr) c->evictions++;
  rc = fill(p, victim, addr, &id);
  if (rc < 0) {
    drop(victim);
    *err = rc;
    return NULL;
  }
  victim->fp = id_hash(&id);
  victim->gen = c->gen;
  victim->epoch = p->code_epoch;
  victim->last_used = c->clock;
  return victim;
}

/* Two-slot memo: a hot frame sits at the same instruction sample after
 * sample, so most lookups skip the table walk. */
int python_code_line(struct py_code *e, int fmt, int64_t addrq) {
  if (e->memo_addrq[0] == addrq) return e->memo_line[0];
  if (e->memo_addrq[1] == addrq) return e->memo_line[1];
  int line = python_line_for(fmt, e->lt, e->lt_len, e->firstlineno, addrq);
  e->memo_addrq[1] = e->memo_addrq[0], e->memo_line[1] = e->memo_line[0];
  e->memo_addrq[0] = addrq, e->memo_line[0] = line;
  return line;
}
