/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ECMA-335 metadata reader. See ecma_metadata.h.
 *
 * The root ("BSJB", version string, stream headers) names the streams;
 * #~ holds the heap-size flags, a bit mask of the tables present, their
 * row counts, then the tables one after the other in table order. A row's
 * size depends on the heap index widths (flags) and on row counts: an
 * index into one table is 2 bytes if that table has fewer than 65536
 * rows, a coded index (a tag in the low bits naming one of several tables)
 * is 2 bytes if every table it may name has fewer than 2^(16 - tag bits)
 * rows. So every table before the ones used here must be sized, which
 * needs the column layout of every table up to GenericParamConstraint.
 */
#include "ecma_metadata.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe_file.h"

#define MD_KNOWN 0x2d          /* tables 0x00..0x2c have a layout here */
#define MD_ROWS_MAX (1u << 24) /* per table: past any real assembly */
#define MD_NEST_DEPTH 16

/* column kinds */
enum { C_END, C_U16, C_U32, C_STR, C_GUID, C_BLOB };
#define T(x) (0x40 | (x)) /* index into table x */
#define K(x) (0x80 | (x)) /* coded index of kind x */

enum {
  K_TYPEDEFORREF,
  K_HASCONSTANT,
  K_HASCUSTOMATTRIBUTE,
  K_HASFIELDMARSHAL,
  K_HASDECLSECURITY,
  K_MEMBERREFPARENT,
  K_HASSEMANTICS,
  K_METHODDEFORREF,
  K_MEMBERFORWARDED,
  K_IMPLEMENTATION,
  K_CUSTOMATTRIBUTETYPE,
  K_RESOLUTIONSCOPE,
  K_TYPEORMETHODDEF,
  K_COUNT
};

#define NONE 0xff
static const struct {
  uint8_t bits, n;
  uint8_t tables[22];
} coded[K_COUNT] = {
    [K_TYPEDEFORREF] = {2, 3, {0x02, 0x01, 0x1b}},
    [K_HASCONSTANT] = {2, 3, {0x04, 0x08, 0x17}},
    [K_HASCUSTOMATTRIBUTE] = {5, 22, {0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0a, 0x00,
                                      0x0e, 0x17, 0x14, 0x11, 0x1a, 0x1b, 0x20, 0x23,
                                      0x26, 0x27, 0x28, 0x2a, 0x2c, 0x2b}},
    [K_HASFIELDMARSHAL] = {1, 2, {0x04, 0x08}},
    [K_HASDECLSECURITY] = {2, 3, {0x02, 0x06, 0x20}},
    [K_MEMBERREFPARENT] = {3, 5, {0x02, 0x01, 0x1a, 0x06, 0x1b}},
    [K_HASSEMANTICS] = {1, 2, {0x14, 0x17}},
    [K_METHODDEFORREF] = {1, 2, {0x06, 0x0a}},
    [K_MEMBERFORWARDED] = {1, 2, {0x04, 0x06}},
    [K_IMPLEMENTATION] = {2, 3, {0x26, 0x23, 0x27}},
    [K_CUSTOMATTRIBUTETYPE] = {3, 5, {NONE, NONE, 0x06, 0x0a, NONE}},
    [K_RESOLUTIONSCOPE] = {2, 4, {0x00, 0x1a, 0x23, 0x01}},
    [K_TYPEORMETHODDEF] = {1, 2, {0x02, 0x06}},
};

/* Column layouts, partition II 22 */
static const uint8_t schema[MD_KNOWN][MD_COLS] = {
    [0x00] = {C_U16, C_STR, C_GUID, C_GUID, C_GUID},                           /* Module */
    [0x01] = {K(K_RESOLUTIONSCOPE), C_STR, C_STR},                             /* TypeRef */
    [0x02] = {C_U32, C_STR, C_STR, K(K_TYPEDEFORREF), T(0x04), T(0x06)},       /* TypeDef */
    [0x03] = {T(0x04)},                                                        /* FieldPtr */
    [0x04] = {C_U16, C_STR, C_BLOB},                                           /* Field */
    [0x05] = {T(0x06)},                                                        /* MethodPtr */
    [0x06] = {C_U32, C_U16, C_U16, C_STR, C_BLOB, T(0x08)},                    /* MethodDef */
    [0x07] = {T(0x08)},                                                        /* ParamPtr */
    [0x08] = {C_U16, C_U16, C_STR},                                            /* Param */
    [0x09] = {T(0x02), K(K_TYPEDEFORREF)},                                     /* InterfaceImpl */
    [0x0a] = {K(K_MEMBERREFPARENT), C_STR, C_BLOB},                            /* MemberRef */
    [0x0b] = {C_U16, K(K_HASCONSTANT), C_BLOB},                                /* Constant */
    [0x0c] = {K(K_HASCUSTOMATTRIBUTE), K(K_CUSTOMATTRIBUTETYPE), C_BLOB},      /* CustomAttribute */
    [0x0d] = {K(K_HASFIELDMARSHAL), C_BLOB},                                   /* FieldMarshal */
    [0x0e] = {C_U16, K(K_HASDECLSECURITY), C_BLOB},                            /* DeclSecurity */
    [0x0f] = {C_U16, C_U32, T(0x02)},                                          /* ClassLayout */
    [0x10] = {C_U32, T(0x04)},                                                 /* FieldLayout */
    [0x11] = {C_BLOB},                                                         /* StandAloneSig */
    [0x12] = {T(0x02), T(0x14)},                                               /* EventMap */
    [0x13] = {T(0x14)},                                                        /* EventPtr */
    [0x14] = {C_U16, C_STR, K(K_TYPEDEFORREF)},                                /* Event */
    [0x15] = {T(0x02), T(0x17)},                                               /* PropertyMap */
    [0x16] = {T(0x17)},                                                        /* PropertyPtr */
    [0x17] = {C_U16, C_STR, C_BLOB},                                           /* Property */
    [0x18] = {C_U16, T(0x06), K(K_HASSEMANTICS)},                              /* MethodSemantics */
    [0x19] = {T(0x02), K(K_METHODDEFORREF), K(K_METHODDEFORREF)},              /* MethodImpl */
    [0x1a] = {C_STR},                                                          /* ModuleRef */
    [0x1b] = {C_BLOB},                                                         /* TypeSpec */
    [0x1c] = {C_U16, K(K_MEMBERFORWARDED), C_STR, T(0x1a)},                    /* ImplMap */
    [0x1d] = {C_U32, T(0x04)},                                                 /* FieldRVA */
    [0x1e] = {C_U32, C_U32},                                                   /* EncLog */
    [0x1f] = {C_U32},                                                          /* EncMap */
    [0x20] = {C_U32, C_U16, C_U16, C_U16, C_U16, C_U32, C_BLOB, C_STR, C_STR}, /* Assembly */
    [0x21] = {C_U32},               /* AssemblyProcessor */
    [0x22] = {C_U32, C_U32, C_U32}, /* AssemblyOS */
    [0x23] = {C_U16, C_U16, C_U16, C_U16, C_U32, C_BLOB, C_STR, C_STR, C_BLOB}, /* AssemblyRef */
    [0x24] = {C_U32, T(0x23)},                                  /* AssemblyRefProcessor */
    [0x25] = {C_U32, C_U32, C_U32, T(0x23)},                    /* AssemblyRefOS */
    [0x26] = {C_U32, C_STR, C_BLOB},                            /* File */
    [0x27] = {C_U32, C_U32, C_STR, C_STR, K(K_IMPLEMENTATION)}, /* ExportedType */
    [0x28] = {C_U32, C_U32, C_STR, K(K_IMPLEMENTATION)},        /* ManifestResource */
    [0x29] = {T(0x02), T(0x02)},                                /* NestedClass */
    [0x2a] = {C_U16, C_U16, K(K_TYPEORMETHODDEF), C_STR},       /* GenericParam */
    [0x2b] = {K(K_METHODDEFORREF), C_BLOB},                     /* MethodSpec */
    [0x2c] = {T(0x2a), K(K_TYPEDEFORREF)},                      /* GenericParamConstraint */
};

static unsigned col_size(uint8_t kind, const uint32_t *rows, uint8_t heap_sizes) {
  if (kind & 0x80) {
    unsigned k = kind & 0x7f;
    uint32_t max = 0;
    for (unsigned i = 0; i < coded[k].n; i++)
      if (coded[k].tables[i] != NONE && rows[coded[k].tables[i]] > max)
        max = rows[coded[k].tables[i]];
    return max < (1u << (16 - coded[k].bits)) ? 2 : 4;
  }
  if (kind & 0x40) return rows[kind & 0x3f] < 0x10000 ? 2 : 4;
  switch (kind) {
    case C_U16:
      return 2;
    case C_U32:
      return 4;
    case C_STR:
      return heap_sizes & 0x01 ? 4 : 2;
    case C_GUID:
      return heap_sizes & 0x02 ? 4 : 2;
    case C_BLOB:
      return heap_sizes & 0x04 ? 4 : 2;
    default:
      return 0;
  }
}

static int open_tables(const uint8_t *s, size_t size, struct ecma_md *md, char *why, size_t cap) {
  if (size < 24) return pe_fail(-ENOEXEC, why, cap, "#~ stream of %zu bytes", size);
  uint8_t heap_sizes = s[6];
  uint64_t valid = (uint64_t)pe_u32(s + 8) | ((uint64_t)pe_u32(s + 12) << 32);
  size_t off = 24;
  uint32_t rows[MD_TABLES] = {0};
  for (unsigned i = 0; i < MD_TABLES; i++) {
    if (!(valid & (1ull << i))) continue;
    if (off + 4 > size) return pe_fail(-ENOEXEC, why, cap, "#~ row counts past the stream");
    rows[i] = pe_u32(s + off);
    off += 4;
    if (rows[i] > MD_ROWS_MAX)
      return pe_fail(-ENOEXEC, why, cap, "table %#x has %u rows", i, rows[i]);
  }
  if (heap_sizes & 0x40) off += 4; /* an extra word after the counts */
  for (unsigned i = 0; i < MD_KNOWN; i++) {
    struct md_table *t = &md->t[i];
    uint32_t rs = 0;
    for (unsigned c = 0; c < MD_COLS && schema[i][c] != C_END; c++) {
      unsigned n = col_size(schema[i][c], rows, heap_sizes);
      t->col_off[c] = (uint8_t)rs;
      t->col_size[c] = (uint8_t)n;
      rs += n;
    }
    t->row_size = rs;
    t->count = rows[i];
    uint64_t bytes = (uint64_t)rows[i] * rs;
    if (off + bytes > size)
      return pe_fail(-ENOEXEC, why, cap, "table %#x (%u rows) past the #~ stream", i, rows[i]);
    t->rows = rows[i] ? s + off : NULL;
    off += (size_t)bytes;
  }
  return 0;
}

int ecma_md_open(const uint8_t *b, size_t size, struct ecma_md *md, char *why, size_t cap) {
  memset(md, 0, sizeof(*md));
  if (size < 20 || pe_u32(b) != 0x424a5342)
    return pe_fail(-ENOEXEC, why, cap, "no metadata signature");
  uint32_t vlen = pe_u32(b + 12);
  if (vlen > 256 || 16 + (size_t)vlen + 4 > size)
    return pe_fail(-ENOEXEC, why, cap, "metadata version string of %u bytes", vlen);
  size_t off = 16 + vlen + 2;
  unsigned nstreams = pe_u16(b + off);
  off += 2;
  const uint8_t *tables = NULL;
  size_t tables_size = 0;
  for (unsigned i = 0; i < nstreams && i < 16; i++) {
    if (off + 8 > size) return pe_fail(-ENOEXEC, why, cap, "stream header past the metadata");
    uint32_t so = pe_u32(b + off), ss = pe_u32(b + off + 4);
    const char *name = (const char *)b + off + 8;
    size_t room = size - off - 8, nl = strnlen(name, room < 32 ? room : 32);
    if (nl == room || nl == 32) return pe_fail(-ENOEXEC, why, cap, "stream name past the metadata");
    off += 8 + ((nl + 4) & ~(size_t)3);
    if ((uint64_t)so + ss > size)
      return pe_fail(-ENOEXEC, why, cap, "stream %.32s past the metadata", name);
    if (strcmp(name, "#~") == 0 || strcmp(name, "#-") == 0) {
      tables = b + so;
      tables_size = ss;
    } else if (strcmp(name, "#Strings") == 0) {
      md->strings = (const char *)b + so;
      md->strings_size = ss;
    }
  }
  if (!tables) return pe_fail(-ENOEXEC, why, cap, "no #~ stream");
  if (!md->strings) return pe_fail(-ENOEXEC, why, cap, "no #Strings heap");
  return open_tables(tables, tables_size, md, why, cap);
}

uint32_t ecma_md_get(const struct ecma_md *md, unsigned tab, uint32_t rid, unsigned col) {
  if (tab >= MD_KNOWN || col >= MD_COLS) return 0;
  const struct md_table *t = &md->t[tab];
  if (!t->rows || rid == 0 || rid > t->count || t->col_size[col] == 0) return 0;
  const uint8_t *p = t->rows + (size_t)(rid - 1) * t->row_size + t->col_off[col];
  return t->col_size[col] == 2 ? pe_u16(p) : pe_u32(p);
}

const char *ecma_md_string(const struct ecma_md *md, uint32_t idx) {
  if (idx >= md->strings_size) return "";
  const char *s = md->strings + idx;
  return memchr(s, 0, md->strings_size - idx) ? s : "";
}

uint32_t *ecma_md_enclosing(const struct ecma_md *md) {
  uint32_t n = md->t[MD_TYPEDEF].count;
  uint32_t *enc = calloc(n ? n : 1, sizeof(*enc));
  if (!enc) return NULL;
  for (uint32_t r = 1; r <= md->t[MD_NESTEDCLASS].count; r++) {
    uint32_t nested = ecma_md_get(md, MD_NESTEDCLASS, r, 0);
    uint32_t outer = ecma_md_get(md, MD_NESTEDCLASS, r, 1);
    if (nested && nested <= n && outer <= n && outer != nested) enc[nested - 1] = outer;
  }
  return enc;
}

/* The TypeDef owning MethodDef rid: the last type whose method list
 * starts at or before it (a type without methods shares its start with
 * the next). */
static uint32_t owner_type(const struct ecma_md *md, uint32_t rid) {
  uint32_t lo = 1, hi = md->t[MD_TYPEDEF].count, found = 0;
  while (lo <= hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ecma_md_get(md, MD_TYPEDEF, mid, 5) <= rid) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}

static size_t put(char *buf, size_t cap, size_t len, const char *s) {
  size_t n = strlen(s);
  if (len + n >= cap) n = len < cap - 1 ? cap - 1 - len : 0;
  memcpy(buf + len, s, n);
  len += n;
  buf[len] = '\0';
  return len;
}

bool ecma_md_method_name(const struct ecma_md *md, const uint32_t *enclosing, uint32_t rid,
                         char *buf, size_t cap) {
  if (cap == 0 || rid == 0 || rid > md->t[MD_METHODDEF].count) return false;
  uint32_t type = owner_type(md, rid);
  if (!type) return false;
  uint32_t chain[MD_NEST_DEPTH];
  unsigned depth = 0;
  for (uint32_t t = type; t && depth < MD_NEST_DEPTH; t = enclosing ? enclosing[t - 1] : 0)
    chain[depth++] = t;
  size_t len = 0;
  buf[0] = '\0';
  const char *ns = ecma_md_string(md, ecma_md_get(md, MD_TYPEDEF, chain[depth - 1], 2));
  if (ns[0]) {
    len = put(buf, cap, len, ns);
    len = put(buf, cap, len, ".");
  }
  for (unsigned i = depth; i-- > 0;) {
    len = put(buf, cap, len, ecma_md_string(md, ecma_md_get(md, MD_TYPEDEF, chain[i], 1)));
    len = put(buf, cap, len, i ? "+" : ".");
  }
  len = put(buf, cap, len, ecma_md_string(md, ecma_md_get(md, MD_METHODDEF, rid, 3)));
  return true;
}
