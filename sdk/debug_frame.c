/* SPDX-License-Identifier: Apache-2.0 */
/*
 * .debug_frame for the remote unwinder.
 *
 * A binary built without unwind tables (-fno-asynchronous-unwind-tables)
 * but with -g describes its frames only in .debug_frame. libunwind reads
 * .debug_frame for local unwinding only: its remote lookup takes an
 * .eh_frame_hdr-style binary-search table over .eh_frame records. So the
 * section is rewritten, once per object, into exactly that:
 *
 *   [ table: (start_ip - base, fde - base) int32 pairs, sorted ]
 *   [ .eh_frame records: one CIE per usable CIE, one FDE per FDE ]
 *
 * laid out at a made-up ELF virtual address `base` just past the object's
 * last PT_LOAD, where the unwinder serves it from memory (the process's own
 * memory is never read there). The CFA instructions are the same DWARF in
 * both sections and are copied unchanged; what differs is the framing:
 *
 *   .debug_frame                    .eh_frame as written here
 *   CIE id 0xffffffff               CIE id 0
 *   CIE version 1, 3 or 4           version 1, augmentation "zR", FDE
 *   augmentation ""                 pointers pc-relative sdata4 (0x1b)
 *   FDE CIE pointer: section offset FDE CIE pointer: distance back to it
 *   FDE initial_location: absolute  pc-relative, so base + bias at run time
 *   link-time address (8 bytes)     lands on the runtime address
 *
 * Refused (the FDE is left out, the address then has no unwind info):
 * 64-bit DWARF records, a CIE with an augmentation, addresses that are not
 * 8 bytes, segment selectors, DW_CFA_set_loc (its operand would be read
 * with the new pointer encoding), unknown CFA opcodes, entries for code
 * discarded by the linker (initial_location 0) and offsets beyond int32.
 * Every length and offset is checked against the section: the file is
 * hostile input.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/debug_frame.h"

#define ENC_PCREL_SDATA4 0x1b /* DW_EH_PE_pcrel | DW_EH_PE_sdata4 */
#define CFA_SET_LOC 0x01
/* libunwind (1.6) takes DW_CFA_register's second operand as an index into
 * its table of register locations, of this many entries, unchecked: a
 * larger one read far outside it and crashed the unwinder. */
#if defined(__aarch64__)
#define CFI_MAX_REG 97
#else
#define CFI_MAX_REG 17
#endif

struct reader {
  const uint8_t *p, *end;
  bool bad;
};

static uint64_t rd_u(struct reader *r, unsigned n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = true;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, r->p, n); /* x86-64: little endian, as the file */
  r->p += n;
  return v;
}

static uint64_t rd_uleb(struct reader *r) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) break;
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = true;
  return 0;
}

static int64_t rd_sleb(struct reader *r) {
  int64_t v = 0;
  unsigned shift = 0;
  while (shift < 64) {
    if (r->p >= r->end) break;
    uint8_t b = *r->p++;
    v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
    shift += 7;
    if (!(b & 0x80)) {
      /* sign-extend; computed unsigned, as 1 << 63 overflows int64_t */
      if (shift < 64 && (b & 0x40)) v |= (int64_t)(~(uint64_t)0 << shift);
      return v;
    }
  }
  r->bad = true;
  return 0;
}

static void skip(struct reader *r, uint64_t n) {
  if (r->bad || (uint64_t)(r->end - r->p) < n) {
    r->bad = true;
    return;
  }
  r->p += n;
}

/* True if the CFA program only uses opcodes whose operands do not depend on
 * the pointer encoding (everything but DW_CFA_set_loc) and is well formed. */
static bool cfa_program_ok(const uint8_t *p, const uint8_t *end) {
  struct reader r = {p, end, false};
  while (r.p < r.end && !r.bad) {
    uint8_t op = *r.p++;
    switch (op >> 6) {
      case 1: /* advance_loc */
      case 3: /* restore */
        continue;
      case 2: /* offset: ULEB */
        rd_uleb(&r);
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00: /* nop */
      case 0x0a: /* remember_state */
      case 0x0b: /* restore_state */
        break;
      case CFA_SET_LOC:
        return false;
      case 0x02: /* advance_loc1 */
        skip(&r, 1);
        break;
      case 0x03: /* advance_loc2 */
        skip(&r, 2);
        break;
      case 0x04: /* advance_loc4 */
        skip(&r, 4);
        break;
      case 0x06: /* restore_extended */
      case 0x07: /* undefined */
      case 0x08: /* same_value */
      case 0x0d: /* def_cfa_register */
      case 0x0e: /* def_cfa_offset */
      case 0x2e: /* GNU_args_size */
        rd_uleb(&r);
        break;
      case 0x13: /* def_cfa_offset_sf */
        rd_sleb(&r);
        break;
      case 0x09: /* register */
        rd_uleb(&r);
        if (rd_uleb(&r) >= CFI_MAX_REG) return false;
        break;
      case 0x05: /* offset_extended */
      case 0x0c: /* def_cfa */
      case 0x14: /* val_offset */
      case 0x2f: /* GNU_negative_offset_extended */
        rd_uleb(&r);
        rd_uleb(&r);
        break;
      case 0x11: /* offset_extended_sf */
      case 0x12: /* def_cfa_sf */
      case 0x15: /* val_offset_sf */
        rd_uleb(&r);
        rd_sleb(&r);
        break;
      case 0x0f: /* def_cfa_expression: block */
        skip(&r, rd_uleb(&r));
        break;
      case 0x10: /* expression: reg, block */
      case 0x16: /* val_expression */
        rd_uleb(&r);
        skip(&r, rd_uleb(&r));
        break;
      default:
        return false;
    }
  }
  return !r.bad;
}

/* ---- .eh_frame check ---- */

/* Skips a pointer of DW_EH_PE encoding enc. */
static void skip_encoded(struct reader *r, uint8_t enc) {
  if (enc == 0xff) return; /* DW_EH_PE_omit */
  switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
      skip(r, 8);
      break;
    case 0x02: /* udata2 */
    case 0x0a: /* sdata2 */
      skip(r, 2);
      break;
    case 0x03: /* udata4 */
    case 0x0b: /* sdata4 */
      skip(r, 4);
      break;
    case 0x01:
      rd_uleb(r);
      break;
    case 0x09:
      rd_sleb(r);
      break;
    default:
      r->bad = true;
  }
}

/* DW_CFA_register operands of a CFA program within CFI_MAX_REG. Scanning
 * stops at an opcode it does not know, as libunwind stops there. */
static bool cfa_registers_ok(const uint8_t *p, const uint8_t *end, uint8_t fde_enc) {
  struct reader r = {p, end, false};
  while (r.p < r.end && !r.bad) {
    uint8_t op = *r.p++;
    if ((op >> 6) == 2) rd_uleb(&r); /* offset */
    if (op >> 6) continue;
    switch (op) {
      case 0x00:
      case 0x0a:
      case 0x0b:
      case 0x2d: /* AArch64 negate_ra_state */
        break;
      case CFA_SET_LOC:
        skip_encoded(&r, fde_enc);
        break;
      case 0x02:
        skip(&r, 1);
        break;
      case 0x03:
        skip(&r, 2);
        break;
      case 0x04:
        skip(&r, 4);
        break;
      case 0x09:
        rd_uleb(&r);
        if (rd_uleb(&r) >= CFI_MAX_REG) return false;
        break;
      case 0x06:
      case 0x07:
      case 0x08:
      case 0x0d:
      case 0x0e:
      case 0x2e:
        rd_uleb(&r);
        break;
      case 0x13:
        rd_sleb(&r);
        break;
      case 0x05:
      case 0x0c:
      case 0x14:
      case 0x2f:
        rd_uleb(&r);
        rd_uleb(&r);
        break;
      case 0x11:
      case 0x12:
      case 0x15:
        rd_uleb(&r);
        rd_sleb(&r);
        break;
      case 0x0f:
        skip(&r, rd_uleb(&r));
        break;
      case 0x10:
      case 0x16:
        rd_uleb(&r);
        skip(&r, rd_uleb(&r));
        break;
      default:
        return true;
    }
  }
  return true;
}

/* An .eh_frame CIE (p just past its id) as an FDE needs it: whether it
 * has a 'z' augmentation, the FDE pointer encoding, where its
 * instructions start. False if it cannot be read. */
struct eh_cie {
  bool z;
  uint8_t fde_enc;
  const uint8_t *instr;
};

static bool read_eh_cie(const uint8_t *p, const uint8_t *end, struct eh_cie *c) {
  struct reader r = {p, end, false};
  uint8_t version = (uint8_t)rd_u(&r, 1);
  const char *aug = (const char *)r.p;
  size_t n = r.bad ? 0 : strnlen(aug, (size_t)(end - r.p));
  if (r.bad || n == (size_t)(end - r.p)) return false;
  r.p += n + 1;
  rd_uleb(&r); /* code alignment */
  rd_sleb(&r); /* data alignment */
  if (version == 1)
    rd_u(&r, 1);
  else
    rd_uleb(&r); /* return address register */
  c->z = aug[0] == 'z';
  c->fde_enc = 0;
  if (c->z) {
    uint64_t alen = rd_uleb(&r);
    if (r.bad || alen > (uint64_t)(end - r.p)) return false;
    struct reader a = {r.p, r.p + alen, false};
    for (const char *k = aug + 1; *k && !a.bad; k++) {
      if (*k == 'R')
        c->fde_enc = (uint8_t)rd_u(&a, 1);
      else if (*k == 'L')
        rd_u(&a, 1);
      else if (*k == 'P')
        skip_encoded(&a, (uint8_t)rd_u(&a, 1));
      else if (*k != 'S' && *k != 'B')
        break;
    }
    r.p += alen;
  } else if (aug[0]) {
    return false; /* an augmentation whose data cannot be skipped */
  }
  c->instr = r.p;
  return !r.bad;
}

/* The record at off (its length field) reads, and so do the CFA programs
 * libunwind runs for it: a CIE's, or an FDE's and its CIE's. 1 for a CIE
 * or FDE, 0 for the terminator, -1 if it cannot be taken; *next is the
 * offset of the record after it. */
static int eh_record_ok(const uint8_t *f, size_t len, size_t off, bool *is_fde, size_t *next) {
  uint32_t rlen, id;
  if (off > len || len - off < 4) return -1;
  memcpy(&rlen, f + off, 4);
  if (rlen == 0) return 0;                         /* terminator */
  if (rlen < 4 || rlen > len - off - 4) return -1; /* also 64-bit DWARF */
  const uint8_t *rec = f + off + 4, *rend = rec + rlen;
  memcpy(&id, rec, 4);
  *next = off + 4 + (size_t)rlen;
  *is_fde = id != 0;
  struct eh_cie cie;
  if (id == 0)
    return read_eh_cie(rec + 4, rend, &cie) && cfa_registers_ok(cie.instr, rend, 0) ? 1 : -1;
  /* an FDE: its id is the distance back to its CIE */
  uint32_t clen, cid;
  if (id > off + 4) return -1;
  size_t cie_off = off + 4 - id;
  if (len - cie_off < 8) return -1;
  memcpy(&clen, f + cie_off, 4);
  memcpy(&cid, f + cie_off + 4, 4);
  const uint8_t *cend = f + cie_off + 4 + clen;
  if (cid != 0 || clen < 4 || clen > len - cie_off - 4 ||
      !read_eh_cie(f + cie_off + 8, cend, &cie) || !cfa_registers_ok(cie.instr, cend, 0))
    return -1;
  struct reader r = {rec + 4, rend, false};
  skip_encoded(&r, cie.fde_enc); /* pc_begin */
  skip_encoded(&r, cie.fde_enc); /* pc_range */
  if (cie.z) skip(&r, rd_uleb(&r));
  return !r.bad && cfa_registers_ok(r.p, rend, cie.fde_enc) ? 1 : -1;
}

bool pp_eh_frame_ok(const uint8_t *hdr, size_t hdr_len, uint64_t hdr_vaddr, const uint8_t *f,
                    size_t len, uint64_t f_vaddr) {
  size_t off = 0, next = 0;
  bool is_fde;
  int rc;
  while (len - off >= 4 && (rc = eh_record_ok(f, len, off, &is_fde, &next)) != 0) {
    if (rc < 0) return false;
    off = next;
  }
  /* libunwind parses an FDE wherever the binary-search table says one
   * is: each must be one inside .eh_frame. The table is read only when it
   * has the layout unwind.c hands libunwind. */
  if (hdr_len < 12 || hdr[0] != 1 || hdr[3] != 0x3b) return true;
  uint32_t count;
  memcpy(&count, hdr + 8, 4);
  size_t n = (hdr_len - 12) / 8 < count ? (hdr_len - 12) / 8 : count;
  for (size_t i = 0; i < n; i++) {
    int32_t rel;
    memcpy(&rel, hdr + 12 + i * 8 + 4, 4);
    uint64_t at = hdr_vaddr + (uint64_t)(int64_t)rel;
    if (at < f_vaddr || at - f_vaddr >= len) return false;
    if (eh_record_ok(f, len, (size_t)(at - f_vaddr), &is_fde, &next) != 1 || !is_fde) return false;
  }
  return true;
}

/* ---- output buffer ---- */

struct out {
  uint8_t *b;
  size_t len, cap;
  bool oom;
};

static void put(struct out *o, const void *p, size_t n) {
  if (o->oom) return;
  if (o->len + n > o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 4096;
    while (cap < o->len + n)
      cap *= 2;
    uint8_t *nb = realloc(o->b, cap);
    if (!nb) {
      o->oom = true;
      return;
    }
    o->b = nb;
    o->cap = cap;
  }
  memcpy(o->b + o->len, p, n);
  o->len += n;
}

static void put_u8(struct out *o, uint8_t v) {
  put(o, &v, 1);
}

static void put_u32(struct out *o, uint32_t v) {
  put(o, &v, 4);
}

static void put_uleb(struct out *o, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    put_u8(o, (uint8_t)(b | (v ? 0x80 : 0)));
  } while (v);
}

static void put_sleb(struct out *o, int64_t v) {
  for (;;) {
    uint8_t b = v & 0x7f;
    v >>= 7; /* arithmetic on every compiler we build with */
    bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
    put_u8(o, (uint8_t)(b | (done ? 0 : 0x80)));
    if (done) return;
  }
}

/* Pads the record that starts at `start` (its length field) to 4 bytes with
 * DW_CFA_nop and writes its length. */
static void close_record(struct out *o, size_t start) {
  while (!o->oom && (o->len - start) % 4)
    put_u8(o, 0);
  if (o->oom) return;
  uint32_t len = (uint32_t)(o->len - start - 4);
  memcpy(o->b + start, &len, 4);
}

/* ---- conversion ---- */

struct cie_map {
  uint64_t df_off; /* offset of the CIE in .debug_frame */
  int64_t out_off; /* offset of its copy in the output, -1: refused */
};

struct entry {
  /* link-time start address - base: what the table holds, and so what it
   * is sorted by (an address below base is negative; sorting by the
   * address itself would misplace one that wraps around) */
  int64_t ip_off;
  uint64_t fde; /* offset of the FDE in the output frame buffer */
};

static int cmp_entry(const void *a, const void *b) {
  const struct entry *x = a, *y = b;
  return x->ip_off < y->ip_off ? -1 : x->ip_off > y->ip_off;
}

/* Copies one CIE; returns its output offset or -1 if it cannot be used. */
static int64_t convert_cie(const uint8_t *rec, const uint8_t *end, struct out *o) {
  struct reader r = {rec, end, false};
  uint8_t version = (uint8_t)rd_u(&r, 1);
  if (r.bad || (version != 1 && version != 3 && version != 4)) return -1;
  if (r.p >= r.end || *r.p != 0) return -1; /* augmentation: only "" */
  r.p++;
  if (version == 4) {
    uint8_t asize = (uint8_t)rd_u(&r, 1), segsize = (uint8_t)rd_u(&r, 1);
    if (asize != 8 || segsize != 0) return -1;
  }
  uint64_t caf = rd_uleb(&r);
  int64_t daf = rd_sleb(&r);
  uint64_t rar = version == 1 ? rd_u(&r, 1) : rd_uleb(&r);
  if (r.bad || rar > 255 || !cfa_program_ok(r.p, r.end)) return -1;
  size_t start = o->len;
  put_u32(o, 0); /* length, set by close_record */
  put_u32(o, 0); /* CIE id in .eh_frame */
  put_u8(o, 1);
  put(o, "zR", 3);
  put_uleb(o, caf);
  put_sleb(o, daf);
  put_u8(o, (uint8_t)rar);
  put_uleb(o, 1); /* augmentation data: the R byte */
  put_u8(o, ENC_PCREL_SDATA4);
  put(o, r.p, (size_t)(r.end - r.p));
  close_record(o, start);
  return o->oom ? -1 : (int64_t)start;
}

static struct cie_map *find_cie(struct cie_map *m, size_t n, uint64_t off) {
  for (size_t i = n; i-- > 0;) /* FDEs usually follow their CIE closely */
    if (m[i].df_off == off) return &m[i];
  return NULL;
}

int pp_debug_frame_convert(const uint8_t *df, size_t len, uint64_t base,
                           struct pp_debug_frame *out) {
  memset(out, 0, sizeof(*out));
  struct out frame = {0};
  struct cie_map *cies = NULL;
  size_t ncies = 0, ciecap = 0;
  struct entry *ents = NULL;
  size_t nents = 0, entcap = 0;
  int rc = 0;
  size_t off = 0;
  while (len - off >= 4) {
    uint32_t rlen;
    memcpy(&rlen, df + off, 4);
    if (rlen == 0xffffffff) break; /* 64-bit DWARF: not written by x86-64 compilers */
    if (rlen < 4 || rlen > len - off - 4) break;
    const uint8_t *rec = df + off + 4, *rend = rec + rlen;
    uint32_t id;
    memcpy(&id, rec, 4);
    if (id == 0xffffffff) {
      if (ncies == ciecap) {
        size_t cap = ciecap ? ciecap * 2 : 16;
        struct cie_map *nc = realloc(cies, cap * sizeof(*nc));
        if (!nc) {
          rc = -ENOMEM;
          break;
        }
        cies = nc;
        ciecap = cap;
      }
      cies[ncies].df_off = off;
      cies[ncies].out_off = convert_cie(rec + 4, rend, &frame);
      ncies++;
    } else {
      struct cie_map *c = find_cie(cies, ncies, id);
      struct reader r = {rec + 4, rend, false};
      uint64_t ip = rd_u(&r, 8), range = rd_u(&r, 8);
      if (c && c->out_off >= 0 && !r.bad && ip != 0 && range != 0 && range <= INT32_MAX &&
          cfa_program_ok(r.p, r.end)) {
        size_t start = frame.len;
        put_u32(&frame, 0);
        put_u32(&frame, (uint32_t)(frame.len - (size_t)c->out_off)); /* back to the CIE */
        /* pc-relative to this field: patched below once the table size,
         * hence the field's address, is known */
        put_u32(&frame, 0);
        put_u32(&frame, (uint32_t)range);
        put_uleb(&frame, 0); /* no augmentation data */
        put(&frame, r.p, (size_t)(r.end - r.p));
        close_record(&frame, start);
        if (nents == entcap) {
          size_t cap = entcap ? entcap * 2 : 64;
          struct entry *ne = realloc(ents, cap * sizeof(*ne));
          if (!ne) {
            rc = -ENOMEM;
            break;
          }
          ents = ne;
          entcap = cap;
        }
        ents[nents].ip_off = (int64_t)(ip - base);
        ents[nents].fde = start;
        nents++;
      }
    }
    off += 4 + (size_t)rlen;
  }
  if (!rc && frame.oom) rc = -ENOMEM;
  if (!rc && nents == 0) rc = -ENOENT;
  if (rc) goto done;

  qsort(ents, nents, sizeof(*ents), cmp_entry);
  size_t table_bytes = nents * 8;
  size_t total = table_bytes + frame.len;
  uint8_t *buf = malloc(total);
  if (!buf) {
    rc = -ENOMEM;
    goto done;
  }
  memcpy(buf + table_bytes, frame.b, frame.len);
  size_t k = 0;
  for (size_t i = 0; i < nents; i++) {
    /* initial_location field: 8 bytes into the FDE */
    int64_t ip_off = ents[i].ip_off;
    int64_t pcrel = (int64_t)((uint64_t)ip_off - (table_bytes + ents[i].fde + 8));
    if (pcrel < INT32_MIN || pcrel > INT32_MAX || ip_off < INT32_MIN || ip_off > INT32_MAX)
      continue; /* too far from base for 32-bit offsets: no unwind info there */
    int32_t v = (int32_t)pcrel;
    memcpy(buf + table_bytes + ents[i].fde + 8, &v, 4);
    int32_t pair[2] = {(int32_t)ip_off, (int32_t)(table_bytes + ents[i].fde)};
    memcpy(buf + k * 8, pair, 8);
    k++;
  }
  if (k == 0) {
    free(buf);
    rc = -ENOENT;
    goto done;
  }
  out->data = buf;
  out->size = total;
  out->vaddr = base;
  out->nentries = k;
done:
  free(frame.b);
  free(cies);
  free(ents);
  return rc;
}
