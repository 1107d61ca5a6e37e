/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading V8 heap objects of another process: tagged values, instance
 * types, strings (sequential one- and two-byte, cons, thin, sliced), the
 * function name and start position a ScopeInfo holds, and a script's line
 * of a source position. Every pointer is checked for its tag, every object
 * for its instance type, every length against a cap; a read that fails or
 * a type that does not match returns an error, never a half answer. Heap
 * objects may be moved by the target's GC between two reads: callers
 * re-check what they cached (v8_walk.c).
 */
#ifndef POLYPROF_NODEJS_V8_HEAP_H
#define POLYPROF_NODEJS_V8_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "v8_layout.h"

#define V8_NAME_MAX 256          /* bytes of UTF-8 kept of a function or script name */
#define V8_SOURCE_MAX (2u << 20) /* source bytes scanned for a line (per function resolved) */

static inline int v8_is_heap(uint64_t w) {
  return (w & 3) == 1 && w > 4096;
}
static inline int v8_is_smi(uint64_t w) {
  return (w & 1) == 0;
}
static inline int64_t v8_smi(const struct v8_layout *L, uint64_t w) {
  return (int64_t)w >> L->smi_shift;
}

/* The instance type of the object at tagged pointer w (two dependent
 * reads: its map, the map's type). 0 or -errno (-EINVAL: not a pointer). */
int v8_type_of(uint32_t pid, const struct v8_layout *L, uint64_t w, uint16_t *type);

/* A string object as UTF-8 (at most cap-1 bytes, NUL-terminated, cut at a
 * character boundary). 0, -EINVAL (not a string, or a representation not
 * read: external), or -errno. */
int v8_read_string(uint32_t pid, const struct v8_layout *L, uint64_t w, char *out, size_t cap);

/* From a ScopeInfo: the function's name (empty if it has none) and the
 * source position where it starts (-1 if unknown). 0 or -errno. */
int v8_scope_info(uint32_t pid, const struct v8_layout *L, uint64_t w, char *name, size_t cap,
                  int64_t *start_pos);

/* 1-based line of source position pos in the Script at tagged pointer
 * script: from its line_ends table when V8 has built it, else by counting
 * line breaks in its source (sequential strings, cons, sliced; at most
 * V8_SOURCE_MAX bytes). 0 if it cannot be told, or -errno. */
int v8_script_line(uint32_t pid, const struct v8_layout *L, uint64_t script, int64_t pos,
                   uint32_t *line);

#endif
