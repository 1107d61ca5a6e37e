/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ECMA-335 metadata (partition II, 24): the metadata root and its
 * streams, the #~ table stream (row sizes computed from the heap-size
 * flags and the row counts that decide simple and coded index widths) and
 * the #Strings heap; and method names built from TypeDef, MethodDef and
 * NestedClass. Internal to the kit (pe_r2r.c). The blob is the caller's
 * and must outlive the reader.
 */
#ifndef POLYPROF_SDK_ECMA_METADATA_H
#define POLYPROF_SDK_ECMA_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MD_TABLES 64
#define MD_COLS 9

enum {
  MD_TYPEREF = 0x01,
  MD_TYPEDEF = 0x02,
  MD_METHODDEF = 0x06,
  MD_NESTEDCLASS = 0x29,
};

struct md_table {
  const uint8_t *rows; /* NULL if the table is absent or past what is known */
  uint32_t count, row_size;
  uint8_t col_off[MD_COLS], col_size[MD_COLS];
};

struct ecma_md {
  const char *strings;
  uint32_t strings_size;
  struct md_table t[MD_TABLES];
};

/* Parses the metadata blob. 0 or -ENOEXEC with why. */
int ecma_md_open(const uint8_t *blob, size_t size, struct ecma_md *md, char *why, size_t why_cap);

/* Column col of row rid (1-based) of table tab; 0 if out of range. */
uint32_t ecma_md_get(const struct ecma_md *md, unsigned tab, uint32_t rid, unsigned col);
/* The #Strings entry at idx, or "" if it does not end inside the heap. */
const char *ecma_md_string(const struct ecma_md *md, uint32_t idx);

/* Per TypeDef row (index rid - 1) the rid of its enclosing type, 0 at top
 * level, from NestedClass; the caller frees it. NULL: out of memory. */
uint32_t *ecma_md_enclosing(const struct ecma_md *md);

/* "Namespace.Outer+Inner.Method" of MethodDef row rid into buf; false if
 * rid is not a MethodDef row or has no owner type. enclosing may be NULL
 * (then nested types read without their enclosing ones). */
bool ecma_md_method_name(const struct ecma_md *md, const uint32_t *enclosing, uint32_t rid,
                         char *buf, size_t cap);

#endif
