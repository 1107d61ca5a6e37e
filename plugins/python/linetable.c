/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Line tables of every CPython version, decoded the way CPython's own
 * PyCode_Addr2Line does (Objects/codeobject.c, Objects/lnotab_notes.txt).
 * The bytes come from the target: every loop is bounded by the table length
 * and by an entry cap, varints by a shift limit, so a hostile table can only
 * produce a wrong line, never an overrun or a long loop.
 */
#include "python.h"

#define MAX_ENTRIES 65536 /* as Tachyon's parse_linetable */

/* 2.7 / 3.6-3.9 co_lnotab: (addr_incr, line_incr) pairs; line_incr is
 * unsigned in 2.7 (big jumps are split into 255 steps) and int8 in 3.6+. */
static int lnotab(const uint8_t *t, size_t len, int first, int64_t addrq, int is_signed) {
  int line = first;
  int64_t addr = 0;
  for (size_t i = 0; i + 1 < len && i / 2 < MAX_ENTRIES; i += 2) {
    addr += t[i];
    if (addr > addrq) break;
    line += is_signed ? (int8_t)t[i + 1] : t[i + 1];
  }
  return line;
}

/* 3.10 co_linetable: (start delta in bytes, int8 line delta) pairs; a line
 * delta of -128 means "no line" for that range. */
static int linetable310(const uint8_t *t, size_t len, int first, int64_t addrq) {
  int line = first;
  int64_t end = 0;
  for (size_t i = 0; i + 1 < len && i / 2 < MAX_ENTRIES; i += 2) {
    int64_t start = end;
    end += t[i];
    int8_t ld = (int8_t)t[i + 1];
    if (ld != -128) line += ld;
    if (start <= addrq && addrq < end) return ld == -128 ? first : line;
  }
  return first;
}

/* 3.11+ location table helpers: 6-bit little-endian varint groups, bit 6
 * set while more follow. */
static int read_varint(const uint8_t *t, size_t len, size_t *pos, uint32_t *out) {
  uint32_t v = 0;
  unsigned shift = 0;
  for (;;) {
    if (*pos >= len || shift > 28) return -1;
    uint8_t b = t[(*pos)++];
    v |= (uint32_t)(b & 63) << shift;
    shift += 6;
    if (!(b & 64)) break;
  }
  *out = v;
  return 0;
}

static int read_svarint(const uint8_t *t, size_t len, size_t *pos, int32_t *out) {
  uint32_t v;
  if (read_varint(t, len, pos, &v) < 0) return -1;
  *out = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
  return 0;
}

static int linetable311(const uint8_t *t, size_t len, int first, int64_t addrq) {
  int line = first;
  int64_t addr = 0;
  size_t pos = 0;
  for (unsigned n = 0; pos < len && n < MAX_ENTRIES; n++) {
    uint8_t b = t[pos++];
    if (!(b & 0x80)) return first; /* not at an entry start: corrupt */
    int code = (b >> 3) & 15;
    int64_t length = (b & 7) + 1;
    int entry_line = line;
    bool has_line = true;
    if (code == 15) { /* NONE */
      has_line = false;
    } else if (code == 14) { /* LONG: line delta, end line, columns */
      int32_t d;
      uint32_t skip;
      if (read_svarint(t, len, &pos, &d) < 0) return first;
      line += d;
      entry_line = line;
      for (int k = 0; k < 3; k++)
        if (read_varint(t, len, &pos, &skip) < 0) return first;
    } else if (code == 13) { /* NO_COLUMNS */
      int32_t d;
      if (read_svarint(t, len, &pos, &d) < 0) return first;
      line += d;
      entry_line = line;
    } else if (code >= 10) { /* ONE_LINE0/1/2 + two column bytes */
      line += code - 10;
      entry_line = line;
      pos += 2;
    } else { /* SHORT: same line, one column byte */
      pos += 1;
    }
    if (addr <= addrq && addrq < addr + length) return has_line ? entry_line : first;
    addr += length;
  }
  return first;
}

int python_line_for(int fmt, const uint8_t *tab, size_t len, int firstlineno, int64_t addrq) {
  if (addrq < 0 || !tab) return firstlineno; /* frame not started yet */
  if (len > PY_LINETABLE_MAX) len = PY_LINETABLE_MAX;
  switch (fmt) {
    case PY_LT_LNOTAB_U8:
      return lnotab(tab, len, firstlineno, addrq, 0);
    case PY_LT_LNOTAB_S8:
      return lnotab(tab, len, firstlineno, addrq, 1);
    case PY_LT_310:
      return linetable310(tab, len, firstlineno, addrq);
    case PY_LT_311:
      return linetable311(tab, len, firstlineno, addrq);
    default:
      return firstlineno;
  }
}
