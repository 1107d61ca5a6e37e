/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain Python objects read out of a target (2.7, 3.6-3.13): dicts (every
 * key-table layout), a dict's entries, a str-keyed lookup, an instance
 * attribute of a Python class (its __dict__, or the shared keys and values
 * 3.11+ keep until someone asks for __dict__), and ints.
 *
 * What an object is comes from its type's tp_name, read once per type and
 * process into a bounded table: nothing is taken to be a dict because it
 * sits where one should. Every count, size and pointer read is bounded
 * before use; a lookup reads at most PY_OBJ_DICT_SCAN entries.
 */
#ifndef POLYPROF_PYTHON_OBJECT_READER_H
#define POLYPROF_PYTHON_OBJECT_READER_H

#include "python.h"

#define PY_OBJ_ATTRS 16       /* (type, attribute) -> index in the type's shared keys */
#define PY_OBJ_TYPES 16       /* (type, tp_name) checks remembered */
#define PY_OBJ_DICT_SCAN 4096 /* entries of one dict read at most */
#define PY_OBJ_CHUNK 64       /* entries read per system call */
#define PY_OBJ_SHARED_KEYS 32 /* shared keys of a class searched (CPython keeps <= 30) */

struct py_objreader {
  struct {
    uint32_t pid, index;
    uint64_t type;
    const char *name; /* a literal: compared by address */
  } attrs[PY_OBJ_ATTRS];
  uint32_t nattrs, next_attr;
  struct {
    uint32_t pid;
    bool is;
    uint64_t type;
    const char *name; /* a literal: compared by address */
  } types[PY_OBJ_TYPES];
  uint32_t ntypes, next_type;
};

/* One live entry of a dict. hash is 0 where the table keeps none (3.11+
 * str-keyed tables). */
struct py_dict_entry {
  uint64_t hash, key, value;
};

bool python_obj_plausible(uint64_t v);
/* Is type's tp_name exactly name (a literal)? Unreadable: false, not
 * remembered. */
bool python_type_is(struct py_objreader *r, const struct py_proc *p, uint64_t type,
                    const char *name);
/* Is obj an instance of exactly the type named name? */
bool python_obj_is(struct py_objreader *r, const struct py_proc *p, uint64_t obj, const char *name);
/* The live entries of dict (checked to be one) into out[0..cap), in the
 * table's order (insertion order from 3.6). Count or -errno. */
int python_dict_entries(struct py_objreader *r, const struct py_proc *p, uint64_t dict,
                        struct py_dict_entry *out, uint32_t cap);
/* The value of str key `key` in dict (its first PY_OBJ_DICT_SCAN
 * entries). 0, -ENOENT or -errno. */
int python_dict_get(struct py_objreader *r, const struct py_proc *p, uint64_t dict, const char *key,
                    uint64_t *val);
/* Instance attribute `name` (a literal) of obj, whose type is type (0:
 * read it). 0, -ENOENT (not set), -ENOTSUP (no layout for the version) or
 * -errno. */
int python_obj_attr(struct py_objreader *r, const struct py_proc *p, uint64_t obj, uint64_t type,
                    const char *name, uint64_t *val);
/* An int (3.x, 2.7 int or long) that fits in 64 bits. 0 or -errno. */
int python_read_int(struct py_objreader *r, const struct py_proc *p, uint64_t addr, int64_t *out);

struct py_objreader *python_objreader_new(void);
void python_objreader_free(struct py_objreader *r);

#endif
