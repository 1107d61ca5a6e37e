/* SPDX-License-Identifier: Apache-2.0 */
/*
 * V8 heap objects read from outside the process (see v8_heap.h).
 *
 * Strings: V8 builds a string from pieces (a cons string is two strings, a
 * sliced string a range of another, a thin string forwards to an
 * internalized copy), so reading one is a bounded walk over pieces whose
 * characters are Latin-1 bytes or UTF-16 units, converted to UTF-8 here.
 * External strings (characters outside the heap, behind a C++ object) are
 * not read.
 *
 * ScopeInfo (a function's scope description, where V8 keeps its name and
 * start position once compiled) has no post-mortem metadata for its
 * variable part. Its layout from V8 10 to 12 is: flags, parameter count,
 * context local count, then local names and infos (count each, or one hash
 * table slot for the names past 75 locals), optional Smi slots for a saved
 * class variable and the receiver, the function variable {name: String or
 * 0, slot index: Smi}, an optional inferred name (String or undefined), and
 * the position {start: Smi, end: Smi}. V8 13 (Node 24) moved the position
 * into the fixed part (slots 3 and 4, hence its first_vars index 5). The
 * name is the first string after the locals; the position is read after
 * it by the shape of the slots that follow (see scope_position()).
 */
#include "v8_heap.h"

#include <errno.h>
#include <string.h>

#include "polyprof/kit/remote.h"

#define MAX_PIECES 64         /* string pieces visited per string */
#define MAX_DEPTH 16          /* nesting of cons/sliced/thin strings */
#define INLINED_LOCALS_MAX 75 /* more context locals: names in a hash table */
#define SCOPE_SLOTS 24        /* variable-part slots looked at after the locals */
#define MAX_LOCALS 4096

int v8_type_of(uint32_t pid, const struct v8_layout *L, uint64_t w, uint16_t *type) {
  if (!v8_is_heap(w)) return -EINVAL;
  uint64_t map;
  int rc = pp_remote_read(pid, w - 1, &map, sizeof(map));
  if (rc < 0) return rc;
  if (!v8_is_heap(map)) return -EINVAL;
  return pp_remote_read(pid, map - 1 + (uint64_t)L->map_instance_type, type, sizeof(*type));
}

/* Receives the characters of a string piece by piece. */
struct visitor {
  int (*chunk)(struct visitor *v, const unsigned char *data, size_t n, int two_byte);
  int pieces;
};

static unsigned char chunk_buf[16384];

static int is_string_type(const struct v8_layout *L, uint16_t t) {
  return t < L->first_nonstring_type;
}

/* Visits count characters of the string at w from character start. */
static int visit(uint32_t pid, const struct v8_layout *L, uint64_t w, uint64_t start,
                 uint64_t count, int depth, struct visitor *v) {
  if (depth > MAX_DEPTH || ++v->pieces > MAX_PIECES) return -E2BIG;
  if (!v8_is_heap(w)) return -EINVAL;
  uint16_t t;
  int rc = v8_type_of(pid, L, w, &t);
  if (rc < 0) return rc;
  if (!is_string_type(L, t)) return -EINVAL;
  int32_t len;
  rc = pp_remote_read(pid, w - 1 + (uint64_t)L->string_length, &len, sizeof(len));
  if (rc < 0) return rc;
  if (len < 0 || (uint64_t)len < start) return -EINVAL;
  if (count > (uint64_t)len - start) count = (uint64_t)len - start;
  if (count == 0) return 0;
  uint16_t repr = t & L->string_repr_mask;
  if (repr == L->seq_tag) {
    int two = (t & L->string_enc_mask) != L->one_byte_tag;
    size_t unit = two ? 2 : 1;
    uint64_t at = w - 1 + (uint64_t)L->seq_chars + start * unit;
    uint64_t left = count * unit;
    while (left) {
      size_t n = left > sizeof(chunk_buf) ? sizeof(chunk_buf) : (size_t)left;
      rc = pp_remote_read(pid, at, chunk_buf, n);
      if (rc < 0) return rc;
      rc = v->chunk(v, chunk_buf, n, two);
      if (rc) return rc > 0 ? 0 : rc; /* > 0: the visitor has enough */
      at += n;
      left -= n;
    }
    return 0;
  }
  if (repr == L->cons_tag) {
    uint64_t parts[2];
    rc = pp_remote_read(pid, w - 1 + (uint64_t)L->cons_first, &parts[0], 8);
    if (rc == 0) rc = pp_remote_read(pid, w - 1 + (uint64_t)L->cons_second, &parts[1], 8);
    if (rc < 0) return rc;
    int32_t flen;
    if (!v8_is_heap(parts[0])) return -EINVAL;
    rc = pp_remote_read(pid, parts[0] - 1 + (uint64_t)L->string_length, &flen, sizeof(flen));
    if (rc < 0) return rc;
    if (flen < 0 || flen > len) return -EINVAL;
    if (start < (uint64_t)flen) {
      uint64_t n = (uint64_t)flen - start < count ? (uint64_t)flen - start : count;
      rc = visit(pid, L, parts[0], start, n, depth + 1, v);
      if (rc) return rc;
      count -= n;
      start = 0;
    } else {
      start -= (uint64_t)flen;
    }
    return count ? visit(pid, L, parts[1], start, count, depth + 1, v) : 0;
  }
  if (repr == L->thin_tag) {
    uint64_t actual;
    rc = pp_remote_read(pid, w - 1 + (uint64_t)L->thin_actual, &actual, 8);
    if (rc < 0) return rc;
    return visit(pid, L, actual, start, count, depth + 1, v);
  }
  if (L->sliced_parent && repr == L->sliced_tag) {
    uint64_t parent, off;
    rc = pp_remote_read(pid, w - 1 + (uint64_t)L->sliced_parent, &parent, 8);
    if (rc == 0) rc = pp_remote_read(pid, w - 1 + (uint64_t)L->sliced_offset, &off, 8);
    if (rc < 0) return rc;
    if (!v8_is_smi(off) || v8_smi(L, off) < 0) return -EINVAL;
    return visit(pid, L, parent, start + (uint64_t)v8_smi(L, off), count, depth + 1, v);
  }
  return -EINVAL; /* external: characters outside the V8 heap */
}

struct utf8_out {
  struct visitor v;
  char *out;
  size_t cap, len;
};

static int put_cp(struct utf8_out *o, uint32_t cp) {
  unsigned char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (unsigned char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (unsigned char)(0xc0 | (cp >> 6));
    b[1] = (unsigned char)(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (unsigned char)(0xe0 | (cp >> 12));
    b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    b[2] = (unsigned char)(0x80 | (cp & 0x3f));
    n = 3;
  } else {
    b[0] = (unsigned char)(0xf0 | (cp >> 18));
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    b[3] = (unsigned char)(0x80 | (cp & 0x3f));
    n = 4;
  }
  if (o->len + n + 1 > o->cap) return 1; /* full: stop at a character boundary */
  memcpy(o->out + o->len, b, n);
  o->len += n;
  o->out[o->len] = '\0';
  return 0;
}

static int utf8_chunk(struct visitor *v, const unsigned char *d, size_t n, int two) {
  struct utf8_out *o = (struct utf8_out *)v;
  if (!two) {
    for (size_t i = 0; i < n; i++) {
      uint32_t cp = d[i] ? d[i] : 0xfffd;
      if (put_cp(o, cp)) return 1;
    }
    return 0;
  }
  for (size_t i = 0; i + 1 < n; i += 2) {
    uint32_t u = (uint32_t)d[i] | ((uint32_t)d[i + 1] << 8);
    if (u >= 0xd800 && u < 0xdc00 && i + 3 < n) {
      uint32_t lo = (uint32_t)d[i + 2] | ((uint32_t)d[i + 3] << 8);
      if (lo >= 0xdc00 && lo < 0xe000) {
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        i += 2;
      } else {
        u = 0xfffd;
      }
    } else if ((u >= 0xd800 && u < 0xe000) || u == 0) {
      u = 0xfffd; /* a lone surrogate (or one split across pieces) */
    }
    if (put_cp(o, u)) return 1;
  }
  return 0;
}

int v8_read_string(uint32_t pid, const struct v8_layout *L, uint64_t w, char *out, size_t cap) {
  if (cap == 0) return -EINVAL;
  out[0] = '\0';
  struct utf8_out o = {.v = {.chunk = utf8_chunk}, .out = out, .cap = cap};
  /* at most cap characters are needed for cap bytes of UTF-8 */
  int rc = visit(pid, L, w, 0, cap, 0, &o.v);
  if (rc < 0) out[0] = '\0';
  return rc < 0 ? rc : 0;
}

/* The (start, end) pair after the function name at slot i of s[0..n). */
static int64_t scope_position(const struct v8_layout *L, const uint64_t *s, int n, int i) {
  int j = i + 1;
  /* {name, slot index} then an inferred name, or {name, slot index} then
   * the position, or an inferred name then the position */
  if (j + 1 < n && v8_is_smi(s[j]) && !v8_is_smi(s[j + 1]))
    j += 2;
  else if (j + 2 < n && v8_is_smi(s[j]) && v8_is_smi(s[j + 1]) && v8_is_smi(s[j + 2]))
    j += 1;
  if (j + 1 >= n || !v8_is_smi(s[j]) || !v8_is_smi(s[j + 1])) return -1;
  int64_t a = v8_smi(L, s[j]), b = v8_smi(L, s[j + 1]);
  return a >= 0 && a <= b ? a : -1;
}

int v8_scope_info(uint32_t pid, const struct v8_layout *L, uint64_t w, char *name, size_t cap,
                  int64_t *start_pos) {
  name[0] = '\0';
  *start_pos = -1;
  uint64_t head[8];
  uint64_t data = w - 1 + 8; /* slots follow the map */
  int fv = L->scopeinfo_first_vars;
  int rc = pp_remote_read(pid, data, head, (size_t)fv * 8);
  if (rc < 0) return rc;
  uint64_t nl = head[L->scopeinfo_ncontextlocals];
  if (!v8_is_smi(nl) || v8_smi(L, nl) < 0 || v8_smi(L, nl) > MAX_LOCALS) return -EINVAL;
  int64_t locals = v8_smi(L, nl);
  int64_t idx = fv + (locals <= INLINED_LOCALS_MAX ? 2 * locals : 1 + locals);
  if (fv >= 5 && v8_is_smi(head[3]) && v8_is_smi(head[4])) {
    int64_t a = v8_smi(L, head[3]), b = v8_smi(L, head[4]);
    if (a >= 0 && a <= b) *start_pos = a;
  }
  uint64_t s[SCOPE_SLOTS];
  rc = pp_remote_read(pid, data + (uint64_t)idx * 8, s, sizeof(s));
  if (rc < 0) return rc;
  for (int i = 0; i < 6; i++) {
    if (!v8_is_heap(s[i])) continue;
    uint16_t t;
    if (v8_type_of(pid, L, s[i], &t) < 0) return -EFAULT;
    if (!is_string_type(L, t)) continue; /* undefined, a hole */
    rc = v8_read_string(pid, L, s[i], name, cap);
    if (rc < 0) return rc;
    if (fv < 5) *start_pos = scope_position(L, s, SCOPE_SLOTS, i);
    return 0;
  }
  return 0;
}

struct line_count {
  struct visitor v;
  uint32_t lines;
};

static int count_chunk(struct visitor *v, const unsigned char *d, size_t n, int two) {
  struct line_count *c = (struct line_count *)v;
  if (!two) {
    for (const unsigned char *p = d, *e = d + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL;
         p++)
      c->lines++;
    return 0;
  }
  for (size_t i = 0; i + 1 < n; i += 2)
    if (d[i] == '\n' && d[i + 1] == 0) c->lines++;
  return 0;
}

int v8_script_line(uint32_t pid, const struct v8_layout *L, uint64_t script, int64_t pos,
                   uint32_t *line) {
  *line = 0;
  if (pos < 0) return 0;
  if (L->script_line_ends) {
    uint64_t le;
    int rc = pp_remote_read(pid, script - 1 + (uint64_t)L->script_line_ends, &le, 8);
    if (rc < 0) return rc;
    uint16_t t;
    if (v8_is_heap(le) && v8_type_of(pid, L, le, &t) == 0 && t == L->type_fixed_array) {
      uint64_t lw;
      rc = pp_remote_read(pid, le - 1 + (uint64_t)L->fixed_array_length, &lw, 8);
      if (rc < 0) return rc;
      int64_t n = v8_is_smi(lw) ? v8_smi(L, lw) : -1;
      if (n > 0 && n <= (1 << 22)) {
        /* binary search over Smi line ends: the line holds pos */
        int64_t lo = 0, hi = n;
        while (lo < hi) {
          int64_t mid = lo + (hi - lo) / 2;
          uint64_t e;
          rc = pp_remote_read(pid, le - 1 + (uint64_t)L->fixed_array_data + (uint64_t)mid * 8, &e,
                              8);
          if (rc < 0) return rc;
          if (!v8_is_smi(e)) return -EINVAL;
          if (v8_smi(L, e) < pos)
            lo = mid + 1;
          else
            hi = mid;
        }
        *line = (uint32_t)lo + 1;
        return 0;
      }
    }
  }
  if ((uint64_t)pos > V8_SOURCE_MAX) return 0;
  uint64_t src;
  int rc = pp_remote_read(pid, script - 1 + (uint64_t)L->script_source, &src, 8);
  if (rc < 0) return rc;
  struct line_count c = {.v = {.chunk = count_chunk}};
  rc = visit(pid, L, src, 0, (uint64_t)pos, 0, &c.v);
  if (rc < 0) return rc == -EINVAL || rc == -E2BIG ? 0 : rc;
  *line = c.lines + 1;
  return 0;
}
