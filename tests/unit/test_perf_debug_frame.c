/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the kit's .debug_frame conversion (sdk/debug_frame.c):
 * the records it writes are what libunwind's remote table lookup expects
 * (checked field by field here, end to end by
 * tests/integration/test_perf_debug_frame.py), the table is sorted, and
 * malformed or unsupported input is left out, never read out of bounds
 * (random input runs under ASan in CI).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../sdk/debug_frame.c"
#include "testlib.h"

struct buf {
  uint8_t b[4096];
  size_t n;
};

static void add(struct buf *b, const void *p, size_t n) {
  memcpy(b->b + b->n, p, n);
  b->n += n;
}
static void add_u8(struct buf *b, uint8_t v) {
  add(b, &v, 1);
}
static void add_u32(struct buf *b, uint32_t v) {
  add(b, &v, 4);
}
static void add_u64(struct buf *b, uint64_t v) {
  add(b, &v, 8);
}

/* CIE as GCC writes it in .debug_frame: version 1, no augmentation, code
 * alignment 1, data alignment -8, return address r16, CFA = rsp + 8, rip at
 * cfa-8. aug: an augmentation string to write instead of "". */
static size_t add_cie(struct buf *b, const char *aug) {
  size_t at = b->n;
  static const uint8_t insns[] = {0x0c, 0x07, 0x08, 0x90, 0x01};
  size_t body = 4 + 1 + strlen(aug) + 1 + 3 + sizeof(insns);
  add_u32(b, (uint32_t)body);
  add_u32(b, 0xffffffff);
  add_u8(b, 1);
  add(b, aug, strlen(aug) + 1);
  add_u8(b, 1);    /* caf */
  add_u8(b, 0x78); /* daf -8 */
  add_u8(b, 16);   /* rar */
  add(b, insns, sizeof(insns));
  return at;
}

static void add_fde(struct buf *b, size_t cie, uint64_t ip, uint64_t range, const uint8_t *insns,
                    size_t n) {
  add_u32(b, (uint32_t)(4 + 16 + n));
  add_u32(b, (uint32_t)cie);
  add_u64(b, ip);
  add_u64(b, range);
  add(b, insns, n);
}

static const uint8_t fde_insns[] = {0x41, 0x0e, 0x10}; /* advance_loc 1; def_cfa_offset 16 */

static int32_t rd32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Checks the converted FDE of table entry i: it covers [ip, ip+range) once
 * its pc-relative start is resolved at `base`, points back to a CIE in
 * .eh_frame form, and carries the original instructions. */
static void check_entry(const struct pp_debug_frame *t, size_t i, uint64_t ip, uint64_t range) {
  const uint8_t *d = t->data;
  int32_t ip_off = rd32(d + i * 8), fde_off = rd32(d + i * 8 + 4);
  CHECK_EQ_INT((int64_t)t->vaddr + ip_off, (int64_t)ip);
  CHECK(fde_off > 0 && (size_t)fde_off + 17 + sizeof(fde_insns) <= t->size);
  if (fde_off <= 0 || (size_t)fde_off + 17 + sizeof(fde_insns) > t->size) return;
  const uint8_t *fde = d + fde_off;
  uint32_t len = (uint32_t)rd32(fde);
  CHECK(len % 4 == 0 && (size_t)fde_off + 4 + len <= t->size);
  int32_t cie_ptr = rd32(fde + 4);
  const uint8_t *cie = fde + 4 - cie_ptr;
  CHECK(cie >= d && cie < fde);
  CHECK_EQ_INT(rd32(cie + 4), 0); /* .eh_frame CIE id */
  CHECK_EQ_INT(cie[8], 1);
  CHECK(memcmp(cie + 9, "zR", 3) == 0);
  CHECK_EQ_INT(cie[12], 1);    /* caf */
  CHECK_EQ_INT(cie[13], 0x78); /* daf -8 */
  CHECK_EQ_INT(cie[14], 16);   /* rar */
  CHECK_EQ_INT(cie[15], 1);    /* augmentation length */
  CHECK_EQ_INT(cie[16], 0x1b); /* pcrel sdata4 */
  uint64_t field = t->vaddr + (uint64_t)fde_off + 8;
  CHECK_EQ_INT((int64_t)(field + (uint64_t)(int64_t)rd32(fde + 8)), (int64_t)ip);
  CHECK_EQ_INT(rd32(fde + 12), (int64_t)range);
  CHECK_EQ_INT(fde[16], 0); /* no augmentation data */
  CHECK(memcmp(fde + 17, fde_insns, sizeof(fde_insns)) == 0);
}

static void test_convert(void) {
  struct buf b = {.n = 0};
  size_t cie = add_cie(&b, "");
  add_fde(&b, cie, 0x12b0, 0x34, fde_insns, sizeof(fde_insns));
  add_fde(&b, cie, 0x1270, 0x3c, fde_insns, sizeof(fde_insns));
  struct pp_debug_frame t;
  CHECK_EQ_INT(pp_debug_frame_convert(b.b, b.n, 0x5000, &t), 0);
  CHECK_EQ_INT(t.nentries, 2);
  CHECK_EQ_INT(t.vaddr, 0x5000);
  if (t.nentries == 2) {
    check_entry(&t, 0, 0x1270, 0x3c); /* sorted by address */
    check_entry(&t, 1, 0x12b0, 0x34);
  }
  free(t.data);
}

static void test_refused(void) {
  struct pp_debug_frame t;
  static const uint8_t set_loc[] = {0x01, 1, 2, 3, 4, 5, 6, 7, 8};
  struct buf b = {.n = 0};
  size_t cie = add_cie(&b, "");
  size_t aug = add_cie(&b, "zR");                           /* an augmentation we do not rewrite */
  add_fde(&b, cie, 0x1000, 0x10, set_loc, sizeof(set_loc)); /* operand in the old encoding */
  add_fde(&b, aug, 0x2000, 0x10, fde_insns, sizeof(fde_insns));
  add_fde(&b, 0x777, 0x3000, 0x10, fde_insns, sizeof(fde_insns)); /* no CIE there */
  add_fde(&b, cie, 0, 0x10, fde_insns, sizeof(fde_insns));        /* discarded code */
  static const uint8_t unknown_op[] = {0x3f};
  add_fde(&b, cie, 0x4000, 0x10, unknown_op, sizeof(unknown_op));
  add_fde(&b, cie, 0x180000000ull, 0x10, fde_insns, sizeof(fde_insns)); /* beyond int32 of base */
  add_fde(&b, cie, 0x5000, 0x10, fde_insns, sizeof(fde_insns));         /* the one good FDE */
  CHECK_EQ_INT(pp_debug_frame_convert(b.b, b.n, 0x9000, &t), 0);
  CHECK_EQ_INT(t.nentries, 1);
  if (t.nentries == 1) check_entry(&t, 0, 0x5000, 0x10);
  free(t.data);

  /* nothing usable */
  struct buf only = {.n = 0};
  add_cie(&only, "");
  CHECK_EQ_INT(pp_debug_frame_convert(only.b, only.n, 0x9000, &t), -ENOENT);
  CHECK(t.data == NULL);

  /* a record longer than the section ends the walk, what came before stays */
  struct buf trunc = {.n = 0};
  cie = add_cie(&trunc, "");
  add_fde(&trunc, cie, 0x1000, 0x10, fde_insns, sizeof(fde_insns));
  add_u32(&trunc, 4000);
  add_u32(&trunc, 0);
  CHECK_EQ_INT(pp_debug_frame_convert(trunc.b, trunc.n, 0x9000, &t), 0);
  CHECK_EQ_INT(t.nentries, 1);
  free(t.data);
  /* cut inside the FDE: nothing */
  CHECK_EQ_INT(pp_debug_frame_convert(trunc.b, cie + 0x18 + 10, 0x9000, &t), -ENOENT);
  /* 64-bit DWARF marker */
  uint8_t dw64[16] = {0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  CHECK_EQ_INT(pp_debug_frame_convert(dw64, sizeof(dw64), 0x9000, &t), -ENOENT);
  /* a CFA program whose block runs past its record */
  struct buf blk = {.n = 0};
  cie = add_cie(&blk, "");
  static const uint8_t long_block[] = {0x0f, 0x7f, 0x00};
  add_fde(&blk, cie, 0x1000, 0x10, long_block, sizeof(long_block));
  CHECK_EQ_INT(pp_debug_frame_convert(blk.b, blk.n, 0x9000, &t), -ENOENT);
}

/* Random bytes and random corruptions of a valid section: any result, no
 * out-of-bounds access (ASan), and every table entry inside the buffer. */
static void test_fuzz(void) {
  struct buf good = {.n = 0};
  size_t cie = add_cie(&good, "");
  for (int i = 0; i < 8; i++)
    add_fde(&good, cie, 0x1000 + 0x40 * (uint64_t)i, 0x30, fde_insns, sizeof(fde_insns));
  uint64_t seed = 0x243f6a8885a308d3ull;
  for (int round = 0; round < 3000; round++) {
    uint8_t b[sizeof(good.b)];
    size_t n = good.n;
    memcpy(b, good.b, n);
    for (int k = 0; k < 1 + round % 7; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      b[(seed >> 33) % n] = (uint8_t)(seed >> 17);
    }
    if (round % 5 == 0) n = (size_t)(seed >> 40) % n;
    uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any overread */
    memcpy(copy, b, n);
    struct pp_debug_frame t;
    int rc = pp_debug_frame_convert(copy, n, 0x9000, &t);
    CHECK(rc == 0 || rc == -ENOENT);
    if (rc == 0) {
      CHECK(t.nentries * 8 <= t.size);
      for (size_t i = 0; i < t.nentries; i++) {
        int32_t off = rd32(t.data + i * 8 + 4);
        CHECK(off > 0 && (size_t)off + 16 <= t.size);
      }
    }
    free(t.data);
    free(copy);
  }
}

int main(void) {
  test_convert();
  test_refused();
  test_fuzz();
  return pp_test_finish("test_perf_debug_frame");
}
