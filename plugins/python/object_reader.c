/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dicts, instance attributes and ints of a target (object_reader.h).
 *
 * Layouts (LP64, release builds with the GIL):
 *   PyObject          ob_type 8 (all versions here)
 *   PyTypeObject      tp_name 24, tp_basicsize 32, tp_flags 168,
 *                     tp_dictoffset 288; PyHeapTypeObject.ht_cached_keys
 *                     872 (3.11), 880 (3.12, 3.13)
 *   PyDictObject 2.7  ma_mask 32, ma_table 40; slots {hash, key, value},
 *                     a free slot has no key, a deleted one no value
 *   PyDictObject 3.x  ma_keys 32, ma_values 40 (a split table's values;
 *                     3.13 puts a 8-byte header before them)
 *   keys 3.6-3.10     dk_size 8, dk_nentries 32, indices from 40 (1, 2, 4
 *                     or 8 bytes each by dk_size), then {hash, key, value}
 *   keys 3.11+        dk_log2_size 8, dk_log2_index_bytes 9, dk_kind 10,
 *                     dk_nentries 24, indices from 32, then entries of
 *                     {hash, key, value} (general) or {key, value} (str
 *                     keys, combined or split)
 *   int 3.x           ob_size (<= 3.11, sign and digit count) or lv_tag
 *                     (3.12+: digits << 3 | sign, 0 +, 1 zero, 2 -) at 16,
 *                     30-bit digits from 24; 2.7 int: ob_ival at 16
 * A deleted entry of a 3.x table has no key (or, split, no value).
 */
#include "object_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/remote.h"

#define TP_NAME 24
#define TP_BASICSIZE 32
#define TP_FLAGS 168
#define TP_DICTOFFSET 288
#define TPFLAGS_INLINE_VALUES (1u << 2) /* 3.13+ */
#define TPFLAGS_MANAGED_DICT (1u << 4)  /* 3.11+ */
#define KEY_MAX 48                      /* longest key looked for, in bytes */

bool python_obj_plausible(uint64_t v) {
  return v >= 4096 && v < (1ull << 47) && (v & 7) == 0;
}

static uint64_t or_rd64(const uint8_t *b, uint32_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

struct py_objreader *python_objreader_new(void) {
  return calloc(1, sizeof(struct py_objreader));
}

void python_objreader_free(struct py_objreader *r) {
  free(r);
}

bool python_type_is(struct py_objreader *r, const struct py_proc *p, uint64_t type,
                    const char *name) {
  if (!python_obj_plausible(type)) return false;
  for (uint32_t i = 0; i < r->ntypes; i++)
    if (r->types[i].type == type && r->types[i].name == name && r->types[i].pid == p->pid)
      return r->types[i].is;
  uint64_t tp_name = 0;
  char text[KEY_MAX];
  if (pp_remote_read((pid_t)p->pid, type + TP_NAME, &tp_name, 8) < 0 || tp_name < 4096 ||
      pp_remote_read_str((pid_t)p->pid, tp_name, text, sizeof(text)) < 0)
    return false;
  uint32_t slot = r->ntypes < PY_OBJ_TYPES ? r->ntypes++ : (r->next_type++ % PY_OBJ_TYPES);
  r->types[slot].pid = p->pid;
  r->types[slot].type = type;
  r->types[slot].name = name;
  r->types[slot].is = strcmp(text, name) == 0;
  return r->types[slot].is;
}

static uint32_t ob_type_at(const struct py_proc *p) {
  return p->off.ob_type ? p->off.ob_type : 8;
}

bool python_obj_is(struct py_objreader *r, const struct py_proc *p, uint64_t obj,
                   const char *name) {
  uint64_t type = 0;
  if (!python_obj_plausible(obj) ||
      pp_remote_read((pid_t)p->pid, obj + ob_type_at(p), &type, 8) < 0)
    return false;
  return python_type_is(r, p, type, name);
}

/* ---- dicts ------------------------------------------------------------ */

/* Where a dict's entries are and how to read them. */
struct dict_table {
  uint64_t entries; /* address of entry 0 */
  uint64_t values;  /* split table: address of value 0 (0: combined) */
  uint32_t esize;   /* 24: {hash, key, value}; 16: {key, value} */
  uint32_t n;       /* entries to read (bounded) */
};

static int dict_table(struct py_objreader *r, const struct py_proc *p, uint64_t dict,
                      struct dict_table *t) {
  pid_t pid = (pid_t)p->pid;
  uint64_t d[6];
  memset(t, 0, sizeof(*t));
  if (p->off.free_threaded || !python_obj_plausible(dict) ||
      pp_remote_read(pid, dict, d, sizeof(d)) < 0)
    return -EFAULT;
  if (!python_type_is(r, p, d[1], "dict")) return -EINVAL;
  uint64_t n = 0;
  if (p->major == 2) {
    uint64_t slots = d[4] + 1;
    if (slots < 8 || slots > (1u << 30) || (slots & (slots - 1)) || !python_obj_plausible(d[5]))
      return -EINVAL;
    t->entries = d[5];
    t->esize = 24;
    n = slots;
  } else if (p->minor <= 10) {
    uint64_t k[5];
    if (!python_obj_plausible(d[4]) || pp_remote_read(pid, d[4], k, sizeof(k)) < 0) return -EFAULT;
    uint64_t size = k[1];
    n = k[4];
    if (size < 8 || size > (1u << 30) || (size & (size - 1)) || n > size) return -EINVAL;
    uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffu ? 4 : 8;
    t->entries = d[4] + 40 + size * width;
    t->esize = 24;
    t->values = d[5];
  } else {
    uint8_t h[32];
    if (!python_obj_plausible(d[4]) || pp_remote_read(pid, d[4], h, sizeof(h)) < 0) return -EFAULT;
    uint8_t log2_size = h[8], log2_index = h[9], kind = h[10];
    n = or_rd64(h, 24);
    if (log2_size < 3 || log2_size > 30 || log2_index < log2_size || log2_index > log2_size + 3 ||
        kind > 2 || n > (1ull << log2_size))
      return -EINVAL;
    t->entries = d[4] + 32 + (1ull << log2_index);
    t->esize = kind == 0 ? 24 : 16;
    if (d[5]) t->values = d[5] + (p->minor >= 13 ? 8 : 0);
    if (kind == 2 && !d[5]) return -EINVAL; /* split keys always come with values */
  }
  if (t->values && !python_obj_plausible(t->values)) return -EINVAL;
  t->n = n < PY_OBJ_DICT_SCAN ? (uint32_t)n : PY_OBJ_DICT_SCAN;
  return 0;
}

/* Live entries first..first+count (count <= PY_OBJ_CHUNK) into out: one
 * system call. Count written or -errno. */
static int dict_chunk(const struct py_proc *p, const struct dict_table *t, uint32_t first,
                      uint32_t count, struct py_dict_entry *out) {
  uint64_t raw[PY_OBJ_CHUNK * 3], vals[PY_OBJ_CHUNK];
  struct pp_remote_iov iov[2] = {
      {t->entries + (uint64_t)first * t->esize, raw, (size_t)count * t->esize},
      {t->values + 8ull * first, vals, 8ull * count}};
  int rc = pp_remote_readv((pid_t)p->pid, iov, t->values ? 2 : 1);
  if (rc < 0) return rc;
  int m = 0;
  uint32_t words = t->esize / 8;
  for (uint32_t i = 0; i < count; i++) {
    const uint64_t *e = raw + (size_t)i * words;
    struct py_dict_entry de = {.hash = words == 3 ? e[0] : 0, .key = e[words - 2]};
    de.value = t->values ? vals[i] : e[words - 1];
    if (!python_obj_plausible(de.key) || !python_obj_plausible(de.value)) continue;
    out[m++] = de;
  }
  return m;
}

int python_dict_entries(struct py_objreader *r, const struct py_proc *p, uint64_t dict,
                        struct py_dict_entry *out, uint32_t cap) {
  struct dict_table t;
  int rc = dict_table(r, p, dict, &t);
  if (rc < 0) return rc;
  uint32_t m = 0;
  struct py_dict_entry chunk[PY_OBJ_CHUNK];
  for (uint32_t first = 0; first < t.n && m < cap; first += PY_OBJ_CHUNK) {
    uint32_t count = t.n - first < PY_OBJ_CHUNK ? t.n - first : PY_OBJ_CHUNK;
    int got = dict_chunk(p, &t, first, count, chunk);
    if (got < 0) return got;
    for (int i = 0; i < got && m < cap; i++)
      out[m++] = chunk[i];
  }
  return (int)m;
}

/* Where an ASCII str keeps its length, state and text, and how many bytes
 * of it hold a key of len bytes. */
struct str_layout {
  uint32_t len_at, state_at, data_at, shift;
};

static void str_layout(const struct py_proc *p, struct str_layout *s) {
  const struct py_offsets *o = &p->off;
  if (o->str_kind == PY_STR_BYTES27) {
    *s = (struct str_layout){.len_at = 16, .data_at = 36};
    return;
  }
  s->len_at = o->str_length ? o->str_length : 16;
  s->state_at = o->str_state ? o->str_state : 32;
  s->data_at = o->str_ascii_hdr ? o->str_ascii_hdr : o->str_kind == PY_STR_UNICODE312 ? 40 : 48;
  s->shift = o->str_kind_shift ? o->str_kind_shift : 2;
}

/* Does the str whose first bytes are b hold exactly key (klen bytes)? A
 * key looked for is ASCII, so a str that is not compact ASCII is not it. */
static bool str_equals(const struct py_proc *p, const struct str_layout *s, const uint8_t *b,
                       const char *key, size_t klen) {
  if ((int64_t)or_rd64(b, s->len_at) != (int64_t)klen) return false;
  if (p->off.str_kind != PY_STR_BYTES27) {
    uint32_t state;
    memcpy(&state, b + s->state_at, 4);
    if (!((state >> (s->shift + 3)) & 1) || !((state >> (s->shift + 4)) & 1)) return false;
    if (p->str_type && or_rd64(b, ob_type_at(p)) != p->str_type) return false;
  }
  return memcmp(b + s->data_at, key, klen) == 0;
}

int python_dict_get(struct py_objreader *r, const struct py_proc *p, uint64_t dict, const char *key,
                    uint64_t *val) {
  *val = 0;
  size_t klen = strlen(key);
  struct str_layout s;
  str_layout(p, &s);
  uint32_t need = s.data_at + (uint32_t)klen;
  if (klen > KEY_MAX || need < s.len_at + 8 || need < s.state_at + 4) return -EINVAL;
  struct dict_table t;
  int rc = dict_table(r, p, dict, &t);
  if (rc < 0) return rc;
  struct py_dict_entry chunk[PY_OBJ_CHUNK];
  uint8_t keys[PY_OBJ_CHUNK][128];
  if (need > sizeof(keys[0])) return -EINVAL;
  for (uint32_t first = 0; first < t.n; first += PY_OBJ_CHUNK) {
    uint32_t count = t.n - first < PY_OBJ_CHUNK ? t.n - first : PY_OBJ_CHUNK;
    int got = dict_chunk(p, &t, first, count, chunk);
    if (got < 0) return got;
    /* every key of the chunk in one call; one unreadable key makes the
     * call fail, then they are read one by one */
    struct pp_remote_iov iov[PY_OBJ_CHUNK];
    for (int i = 0; i < got; i++)
      iov[i] = (struct pp_remote_iov){chunk[i].key, keys[i], need};
    bool batch = got > 0 && pp_remote_readv((pid_t)p->pid, iov, (size_t)got) == 0;
    for (int i = 0; i < got; i++) {
      if (!batch && pp_remote_read((pid_t)p->pid, chunk[i].key, keys[i], need) < 0) continue;
      if (str_equals(p, &s, keys[i], key, klen)) {
        *val = chunk[i].value;
        return 0;
      }
    }
  }
  return -ENOENT;
}

/* ---- instance attributes ---------------------------------------------- */

/* Index of attribute `name` in the shared keys of a 3.11-3.13 class, or
 * -ENOENT. */
static int attr_index(struct py_objreader *r, const struct py_proc *p, uint64_t type,
                      const char *name) {
  for (uint32_t i = 0; i < r->nattrs; i++)
    if (r->attrs[i].type == type && r->attrs[i].name == name && r->attrs[i].pid == p->pid)
      return (int)r->attrs[i].index;
  pid_t pid = (pid_t)p->pid;
  uint32_t cached_keys = p->minor == 11 ? 872 : 880;
  uint64_t keys = 0;
  uint8_t hdr[32];
  if (pp_remote_read(pid, type + cached_keys, &keys, 8) < 0 || !python_obj_plausible(keys) ||
      pp_remote_read(pid, keys, hdr, sizeof(hdr)) < 0)
    return -EFAULT;
  uint8_t log2_index_bytes = hdr[9], dk_kind = hdr[10];
  int64_t nentries = (int64_t)or_rd64(hdr, 24);
  if (dk_kind != 2 || log2_index_bytes > 16 || nentries <= 0) return -ENOENT; /* not split */
  if (nentries > PY_OBJ_SHARED_KEYS) nentries = PY_OBJ_SHARED_KEYS;
  uint64_t entries[2 * PY_OBJ_SHARED_KEYS];
  if (pp_remote_read(pid, keys + 32 + (1ull << log2_index_bytes), entries, (size_t)nentries * 16) <
      0)
    return -EFAULT;
  for (int64_t i = 0; i < nentries; i++) {
    char key[KEY_MAX];
    if (python_read_string(p, entries[2 * i], key, sizeof(key)) < 0 || strcmp(key, name) != 0)
      continue;
    uint32_t slot = r->nattrs < PY_OBJ_ATTRS ? r->nattrs++ : (r->next_attr++ % PY_OBJ_ATTRS);
    r->attrs[slot].pid = p->pid;
    r->attrs[slot].type = type;
    r->attrs[slot].name = name;
    r->attrs[slot].index = (uint32_t)i;
    return (int)i;
  }
  return -ENOENT;
}

/* 3.11-3.13: where value `idx` of obj's values lives (0 in *slot: the
 * values are gone, *dict then names the materialised __dict__). */
static int managed_slot(const struct py_proc *p, uint64_t obj, const uint8_t *tb, int idx,
                        uint64_t *slot, uint64_t *dict) {
  pid_t pid = (pid_t)p->pid;
  *slot = *dict = 0;
  uint64_t pre[2]; /* the two words three and four before the object */
  if (pp_remote_read(pid, obj - 32, pre, sizeof(pre)) < 0) return -EFAULT;
  if (p->minor == 11) { /* values, then the dict */
    if (pre[0] && idx >= 0)
      *slot = pre[0] + 8 * (uint64_t)idx;
    else
      *dict = pre[1];
  } else if (p->minor == 12) { /* the dict, or the values pointer minus one */
    if (pre[1] & 1) {
      if (idx >= 0) *slot = pre[1] + 1 + 8 * (uint64_t)idx;
    } else {
      *dict = pre[1];
    }
  } else { /* inline after the object's basic size, behind an 8-byte header */
    uint64_t basicsize = or_rd64(tb, TP_BASICSIZE), flags = or_rd64(tb, TP_FLAGS);
    uint8_t vh[8] = {0};
    if ((flags & TPFLAGS_INLINE_VALUES) && basicsize >= 16 && basicsize <= 4096 &&
        pp_remote_read(pid, obj + basicsize, vh, sizeof(vh)) < 0)
      return -EFAULT;
    if (vh[3] && idx >= 0 && (uint32_t)idx < vh[0]) /* valid, capacity */
      *slot = obj + basicsize + 8 + 8 * (uint64_t)idx;
    else if (!vh[3])
      *dict = pre[1];
  }
  return 0;
}

int python_obj_attr(struct py_objreader *r, const struct py_proc *p, uint64_t obj, uint64_t type,
                    const char *name, uint64_t *val) {
  pid_t pid = (pid_t)p->pid;
  *val = 0;
  if ((p->major == 3 && p->minor > 13) || p->off.free_threaded) return -ENOTSUP;
  if (!python_obj_plausible(obj)) return -EINVAL;
  if (!type && pp_remote_read(pid, obj + ob_type_at(p), &type, 8) < 0) return -EFAULT;
  uint8_t tb[TP_DICTOFFSET + 8];
  if (!python_obj_plausible(type) || pp_remote_read(pid, type, tb, sizeof(tb)) < 0) return -EFAULT;
  int64_t dictoffset = (int64_t)or_rd64(tb, TP_DICTOFFSET);
  uint64_t dict = 0;
  if (p->major == 3 && p->minor >= 11 && (or_rd64(tb, TP_FLAGS) & TPFLAGS_MANAGED_DICT)) {
    int idx = attr_index(r, p, type, name);
    if (idx < 0 && idx != -ENOENT) return idx;
    uint64_t slot = 0;
    int rc = managed_slot(p, obj, tb, idx, &slot, &dict);
    if (rc < 0) return rc;
    if (slot) {
      if (pp_remote_read(pid, slot, val, 8) < 0) return -EFAULT;
      return python_obj_plausible(*val) ? 0 : -ENOENT;
    }
  } else if (dictoffset >= 16 && dictoffset <= 4096) {
    if (pp_remote_read(pid, obj + (uint64_t)dictoffset, &dict, 8) < 0) return -EFAULT;
  }
  if (!python_obj_plausible(dict)) return -ENOENT;
  return python_dict_get(r, p, dict, name, val);
}

/* ---- ints --------------------------------------------------------------- */

int python_read_int(struct py_objreader *r, const struct py_proc *p, uint64_t addr, int64_t *out) {
  uint8_t b[24 + 12]; /* header, three 30-bit digits */
  *out = 0;
  if (p->off.free_threaded || !python_obj_plausible(addr) ||
      pp_remote_read((pid_t)p->pid, addr, b, sizeof(b)) < 0)
    return -EFAULT;
  uint64_t type = or_rd64(b, 8);
  uint64_t ndigits;
  bool neg;
  if (p->major == 2 && python_type_is(r, p, type, "int")) {
    *out = (int64_t)or_rd64(b, 16);
    return 0;
  }
  bool is_long = p->major == 2  ? python_type_is(r, p, type, "long")
                 : p->long_type ? type == p->long_type
                                : python_type_is(r, p, type, "int");
  if (!is_long) return -EINVAL;
  uint64_t w = or_rd64(b, 16);
  if (p->major == 3 && p->minor >= 12) {
    if ((w & 3) == 3) return -EINVAL;
    ndigits = w >> 3;
    neg = (w & 3) == 2;
  } else {
    neg = (int64_t)w < 0;
    ndigits = neg ? -w : w;
  }
  if (ndigits > 3) return -ERANGE;
  uint64_t v = 0;
  for (uint64_t i = 0; i < ndigits; i++) {
    uint32_t d;
    memcpy(&d, b + 24 + 4 * i, 4);
    if (d >> 30 || (i == 2 && d >> 3)) return -ERANGE; /* bad digit, or past 63 bits */
    v |= (uint64_t)d << (30 * i);
  }
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}
