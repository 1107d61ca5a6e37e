/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The object reader (dicts, instance attributes, ints) against fake CPython
 * objects built in this process's own memory and read back through
 * process_vm_readv on our own pid, as a target would be read: every
 * key-table layout (2.7, 3.6-3.10, 3.11+; combined and split), the three
 * 3.11-3.13 homes of an instance's values, both int layouts, and hostile
 * variants of each (sizes that lie, unmapped and misaligned pointers,
 * objects of the wrong type, ints too large) that must end in an error.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../plugins/python/codecache.c"
#include "../../plugins/python/debug_offsets.c"
#include "../../plugins/python/linetable.c"
#include "../../plugins/python/object_reader.c"
#include "../../plugins/python/offsets.c"
#include "python_self_proc.h"
#include "testlib.h"

#define A(ptr) ((uint64_t)(uintptr_t)(ptr))

/* Every fake object comes from one arena: nothing to free, nothing leaks. */
static _Alignas(64) uint8_t arena[1 << 18];
static size_t arena_used;

static uint8_t *zalloc(size_t n) {
  n = (n + 63) & ~(size_t)63;
  if (arena_used + n > sizeof(arena)) abort();
  uint8_t *b = arena + arena_used;
  arena_used += n;
  memset(b, 0, n);
  return b;
}

static void put64(uint8_t *b, size_t off, uint64_t v) {
  memcpy(b + off, &v, 8);
}

/* A type object named name, with room for ht_cached_keys (880). */
static uint8_t *make_type(const char *name) {
  uint8_t *t = zalloc(1024);
  put64(t, 24, A(name));
  return t;
}

/* A str of p's layout holding ASCII text. */
static uint8_t *make_str(const struct py_proc *p, const char *text) {
  uint8_t *o = zalloc(128);
  size_t len = strlen(text);
  put64(o, 16, len);
  if (p->major == 2) {
    memcpy(o + 36, text, len);
    return o;
  }
  uint32_t state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
  memcpy(o + 32, &state, 4);
  memcpy(o + (p->minor >= 12 ? 40 : 48), text, len);
  return o;
}

static uint8_t *dict_type;

/* A 3.11+ dict of str keys (dk_kind 1), or split (kind 2) with values. */
static uint8_t *make_dict311(const struct py_proc *p, const char **keys, const uint64_t *vals,
                             int n, bool split, uint8_t **keys_out) {
  uint8_t *k = zalloc(32 + 8 + 16 * 8);
  k[8] = 3, k[9] = 3, k[10] = split ? 2 : 1; /* 8 slots, 1-byte indices */
  put64(k, 24, (uint64_t)n);
  uint8_t *values = zalloc(8 + 8 * 8);
  for (int i = 0; i < n; i++) {
    put64(k, 40 + 16 * (size_t)i, A(make_str(p, keys[i])));
    if (split)
      put64(values, (p->minor >= 13 ? 8 : 0) + 8 * (size_t)i, vals[i]);
    else
      put64(k, 40 + 16 * (size_t)i + 8, vals[i]);
  }
  uint8_t *d = zalloc(48);
  put64(d, 8, A(dict_type));
  put64(d, 32, A(k));
  if (split) put64(d, 40, A(values));
  if (keys_out) *keys_out = k;
  return d;
}

/* A 3.6-3.10 dict: {hash, key, value} entries after 8 one-byte indices. */
static uint8_t *make_dict36(const struct py_proc *p, const char **keys, const uint64_t *vals, int n,
                            uint8_t **keys_out) {
  uint8_t *k = zalloc(48 + 24 * 8);
  put64(k, 8, 8);
  put64(k, 32, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    put64(k, 48 + 24 * (size_t)i, 1000 + (uint64_t)i);
    put64(k, 48 + 24 * (size_t)i + 8, keys[i] ? A(make_str(p, keys[i])) : 0);
    put64(k, 48 + 24 * (size_t)i + 16, vals[i]);
  }
  uint8_t *d = zalloc(48);
  put64(d, 8, A(dict_type));
  put64(d, 32, A(k));
  if (keys_out) *keys_out = k;
  return d;
}

static void dicts(void) {
  struct py_objreader *r = python_objreader_new();
  uint64_t v = 0;
  uint8_t *target = zalloc(64), *other = zalloc(64);
  const char *keys[] = {"threading", "_active", "os"};
  uint64_t vals[] = {A(target), A(other), A(other)};

  for (int minor = 11; minor <= 13; minor++) {
    struct py_proc p = self_proc(3, minor);
    uint8_t *kt;
    uint8_t *d = make_dict311(&p, keys, vals, 3, false, &kt);
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), 0);
    CHECK(v == A(target));
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "missing", &v), -ENOENT);
    struct py_dict_entry ents[8];
    CHECK_EQ_INT(python_dict_entries(r, &p, A(d), ents, 8), 3);
    CHECK_EQ_INT(python_dict_entries(r, &p, A(d), ents, 2), 2); /* the cap holds */
    uint8_t *ds = make_dict311(&p, keys, vals, 3, true, NULL);
    CHECK_EQ_INT(python_dict_get(r, &p, A(ds), "_active", &v), 0);
    CHECK(v == A(other));
    /* hostile: more entries than slots, index bytes that cannot be, a
     * huge table, a kind that does not exist */
    put64(kt, 24, 9);
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), -EINVAL);
    put64(kt, 24, 3);
    kt[9] = 2;
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), -EINVAL);
    kt[9] = 3, kt[8] = 40;
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), -EINVAL);
    kt[8] = 3, kt[10] = 7;
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), -EINVAL);
    kt[10] = 1;
    CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), 0);
  }

  struct py_proc p = self_proc(3, 9);
  uint8_t *kt;
  const char *holes[] = {"threading", NULL, "os"}; /* a deleted entry has no key */
  uint8_t *d = make_dict36(&p, holes, vals, 3, &kt);
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "os", &v), 0);
  CHECK(v == A(other));
  struct py_dict_entry ents[8];
  CHECK_EQ_INT(python_dict_entries(r, &p, A(d), ents, 8), 2);
  CHECK(ents[0].hash == 1000 && ents[1].hash == 1002);
  /* split: the values array decides */
  uint8_t *values = zalloc(64);
  put64(values, 0, A(other));
  put64(d, 40, A(values));
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "threading", &v), 0);
  CHECK(v == A(other));
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "os", &v), -ENOENT); /* no value in the split table */
  put64(d, 40, A(values) + 3);                                   /* misaligned values */
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "os", &v), -EINVAL);
  put64(d, 40, 0);
  put64(kt, 8, 12); /* not a power of two */
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "os", &v), -EINVAL);
  /* a table that claims a million entries: the read of its tail fails,
   * at most PY_OBJ_DICT_SCAN are looked at */
  put64(kt, 8, 1u << 20);
  put64(kt, 32, 1u << 20);
  CHECK(python_dict_get(r, &p, A(d), "os", &v) < 0);
  put64(kt, 8, 8);
  put64(kt, 32, 3);
  /* not a dict, a keys pointer into nothing, the dict itself unmapped */
  uint8_t *list_type = make_type("list");
  put64(d, 8, A(list_type));
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "os", &v), -EINVAL);
  put64(d, 8, A(dict_type));
  uint8_t *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  put64(d, 32, A(none));
  CHECK_EQ_INT(python_dict_get(r, &p, A(d), "os", &v), -EFAULT);
  CHECK_EQ_INT(python_dict_get(r, &p, A(none), "os", &v), -EFAULT);
  CHECK_EQ_INT(python_dict_get(r, &p, 12345, "os", &v), -EFAULT);

  /* 2.7: open addressing, free and deleted (dummy key, no value) slots */
  struct py_proc p27 = self_proc(2, 7);
  uint8_t *table = zalloc(24 * 8), *dummy = zalloc(32);
  put64(table, 24 * 2 + 8, A(dummy));
  put64(table, 24 * 5, 77);
  put64(table, 24 * 5 + 8, A(make_str(&p27, "_active")));
  put64(table, 24 * 5 + 16, A(target));
  uint8_t *d27 = zalloc(56);
  put64(d27, 8, A(dict_type));
  put64(d27, 32, 7);
  put64(d27, 40, A(table));
  CHECK_EQ_INT(python_dict_get(r, &p27, A(d27), "_active", &v), 0);
  CHECK(v == A(target));
  CHECK_EQ_INT(python_dict_entries(r, &p27, A(d27), ents, 8), 1);
  CHECK(ents[0].hash == 77);
  put64(d27, 32, 6); /* mask + 1 not a power of two */
  CHECK_EQ_INT(python_dict_get(r, &p27, A(d27), "_active", &v), -EINVAL);
  python_objreader_free(r);
}

/* The attribute _name of an instance of a Python class, in each home. */
static void attributes(void) {
  struct py_objreader *r = python_objreader_new();
  uint64_t v = 0;
  uint8_t *name = zalloc(64), *target = zalloc(64);
  const char *keys[] = {"_target", "_name"};
  uint64_t vals[] = {A(target), A(name)};

  /* 3.9: a __dict__ at tp_dictoffset */
  struct py_proc p = self_proc(3, 9);
  uint8_t *cls = make_type("Thread"), *obj = zalloc(64);
  put64(cls, 288, 16);
  put64(obj, 8, A(cls));
  put64(obj, 16, A(make_dict36(&p, keys, vals, 2, NULL)));
  CHECK_EQ_INT(python_obj_attr(r, &p, A(obj), 0, "_name", &v), 0);
  CHECK(v == A(name));
  CHECK_EQ_INT(python_obj_attr(r, &p, A(obj), 0, "_other", &v), -ENOENT);
  put64(cls, 288, (uint64_t)-8); /* no __dict__ there */
  CHECK_EQ_INT(python_obj_attr(r, &p, A(obj), 0, "_name", &v), -ENOENT);

  /* 3.11-3.13: shared keys at ht_cached_keys, values before the object
   * (3.11, 3.12) or inline after it (3.13) */
  for (int minor = 11; minor <= 13; minor++) {
    struct py_proc q = self_proc(3, minor);
    struct py_objreader *rq = python_objreader_new();
    uint8_t *t = make_type("Thread"), *keys_obj;
    make_dict311(&q, keys, vals, 2, true, &keys_obj);
    put64(t, minor == 11 ? 872 : 880, A(keys_obj));
    put64(t, 168, (1u << 4) | (minor == 13 ? 1u << 2 : 0));
    put64(t, 32, 16); /* basic size */
    uint8_t *buf = zalloc(128), *o = buf + 32;
    uint8_t *values = zalloc(64);
    put64(values, 0, A(target));
    put64(values, 8, A(name));
    put64(o, 8, A(t));
    if (minor == 11) {
      put64(buf, 0, A(values));
    } else if (minor == 12) {
      put64(buf, 8, A(values) - 1);
    } else {
      o[16] = 4, o[19] = 1; /* capacity, valid */
      put64(o, 24, A(target));
      put64(o, 32, A(name));
    }
    CHECK_EQ_INT(python_obj_attr(rq, &q, A(o), 0, "_name", &v), 0);
    CHECK(v == A(name));
    /* the values gone to a materialised __dict__ */
    uint8_t *dict = make_dict311(&q, keys, vals, 2, false, NULL);
    if (minor == 11) put64(buf, 0, 0);
    if (minor == 13) o[19] = 0;
    put64(buf, 8, A(dict));
    CHECK_EQ_INT(python_obj_attr(rq, &q, A(o), 0, "_name", &v), 0);
    CHECK(v == A(name));
    /* neither: not set */
    put64(buf, 8, 0);
    CHECK_EQ_INT(python_obj_attr(rq, &q, A(o), 0, "_name", &v), -ENOENT);
    python_objreader_free(rq);
  }
  struct py_proc p14 = self_proc(3, 14);
  CHECK_EQ_INT(python_obj_attr(r, &p14, A(obj), 0, "_name", &v), -ENOTSUP);
  python_objreader_free(r);
}

static void ints(void) {
  struct py_objreader *r = python_objreader_new();
  int64_t v = 0;
  uint8_t *long_type = make_type("int"), *o = zalloc(64);
  uint64_t ident = 0x7f1234567890ull; /* a pthread_t: two 30-bit digits */
  uint32_t d0 = (uint32_t)(ident & 0x3fffffff), d1 = (uint32_t)((ident >> 30) & 0x3fffffff);
  put64(o, 8, A(long_type));
  memcpy(o + 24, &d0, 4);
  memcpy(o + 28, &d1, 4);
  struct py_proc p = self_proc(3, 11);
  put64(o, 16, 2);
  CHECK_EQ_INT(python_read_int(r, &p, A(o), &v), 0);
  CHECK(v == (int64_t)ident);
  put64(o, 16, (uint64_t)-2);
  CHECK_EQ_INT(python_read_int(r, &p, A(o), &v), 0);
  CHECK(v == -(int64_t)ident);
  put64(o, 16, 5); /* more digits than 64 bits hold */
  CHECK_EQ_INT(python_read_int(r, &p, A(o), &v), -ERANGE);
  struct py_proc q = self_proc(3, 12);
  q.long_type = A(long_type);
  put64(o, 16, 2u << 3); /* lv_tag: two digits, positive */
  CHECK_EQ_INT(python_read_int(r, &q, A(o), &v), 0);
  CHECK(v == (int64_t)ident);
  put64(o, 16, (2u << 3) | 3); /* no such sign */
  CHECK_EQ_INT(python_read_int(r, &q, A(o), &v), -EINVAL);
  put64(o, 16, 2u << 3);
  uint32_t bad = 1u << 30;
  memcpy(o + 28, &bad, 4);
  CHECK_EQ_INT(python_read_int(r, &q, A(o), &v), -ERANGE);
  q.long_type = A(dict_type); /* not an int */
  CHECK_EQ_INT(python_read_int(r, &q, A(o), &v), -EINVAL);
  struct py_proc p27 = self_proc(2, 7);
  uint8_t *int27 = make_type("int"), *i27 = zalloc(32);
  put64(i27, 8, A(int27));
  put64(i27, 16, ident);
  CHECK_EQ_INT(python_read_int(r, &p27, A(i27), &v), 0);
  CHECK(v == (int64_t)ident);
  python_objreader_free(r);
}

int main(void) {
  dict_type = make_type("dict");
  dicts();
  attributes();
  ints();
  return pp_test_finish("test_python_object_reader");
}
