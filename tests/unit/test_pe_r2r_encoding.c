/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the encodings under the ReadyToRun reader on hand-made
 * bytes, the cases a real image may not show: NativeFormat integers of
 * every width and sign (sdk/native_format.c), a sparse NativeArray's
 * present, absent and out-of-range elements, method entries with and
 * without fixups, and ReadyToRun method signatures (sdk/r2r_signature.c):
 * owner types, instantiations, module overrides, function pointers,
 * tokens of another module, and what is refused.
 */
#include <stdint.h>
#include <string.h>

#include "../../sdk/native_format.h"
#include "../../sdk/r2r_signature.h"
#include "testlib.h"

#define BASE 0x1000u /* an RVA, as offsets are in an image */

static void integers(void) {
  static const struct {
    uint8_t b[5];
    unsigned n;
    uint32_t u;
    int32_t s;
  } cases[] = {
      {{0x00}, 1, 0, 0},
      {{0xfe}, 1, 127, -1}, /* 7 bits: 0x7f */
      {{0x80}, 1, 64, -64},
      {{0x01, 0x01}, 2, 64, 64}, /* 14 bits */
      {{0xfd, 0xff}, 2, 0x3fff, -1},
      {{0x03, 0x00, 0x01}, 3, 1u << 13, 1 << 13},       /* 21 bits */
      {{0x07, 0x00, 0x00, 0x01}, 4, 1u << 20, 1 << 20}, /* 28 bits */
      {{0xf7, 0xff, 0xff, 0xff}, 4, 0x0fffffff, -1},
      {{0x0f, 0x78, 0x56, 0x34, 0x12}, 5, 0x12345678, 0x12345678},
      {{0x0f, 0xff, 0xff, 0xff, 0xff}, 5, 0xffffffffu, -1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct nf_reader r = {cases[i].b, BASE, cases[i].n};
    uint32_t off = BASE, u = 0;
    int32_t s = 0;
    CHECK(nf_unsigned(&r, &off, &u));
    CHECK_EQ_INT(off - BASE, cases[i].n);
    CHECK_EQ_INT(u, cases[i].u);
    off = BASE;
    CHECK(nf_signed(&r, &off, &s));
    CHECK_EQ_INT(s, cases[i].s);
    /* one byte short: refused, the offset unmoved */
    struct nf_reader cut = {cases[i].b, BASE, cases[i].n - 1};
    off = BASE;
    CHECK(!nf_unsigned(&cut, &off, &u));
    CHECK_EQ_INT(off, BASE);
  }
  static const uint8_t bad[] = {0x1f, 0, 0, 0, 0, 0, 0, 0, 0};
  struct nf_reader r = {bad, BASE, sizeof(bad)};
  uint32_t off = BASE, u;
  CHECK(!nf_unsigned(&r, &off, &u)); /* no 9-byte form here */
  off = BASE - 1;
  CHECK(!nf_unsigned(&r, &off, &u)); /* before the section */
}

static void arrays(void) {
  /* two elements, only element 0 present: header (2 << 2 | 1-byte
   * index), the block's root offset, a leaf for element 0, its entry
   * (code block 5 << 1: no fixups), each a NativeFormat integer */
  static const uint8_t a[] = {2 * 4 * 2, 1, 0x00, (5 << 1) << 1};
  struct nf_reader r = {a, BASE, sizeof(a)};
  struct nf_array arr;
  CHECK(nf_array_open(&r, BASE, &arr));
  CHECK_EQ_INT(arr.count, 2);
  uint32_t off = 0, block = 0;
  CHECK(nf_array_get(&arr, 0, &off));
  CHECK_EQ_INT(off, BASE + 3);
  CHECK(nf_method_entry(&r, off, &block));
  CHECK_EQ_INT(block, 5);
  CHECK(!nf_array_get(&arr, 1, &off)); /* the leaf is element 0's */
  CHECK(!nf_array_get(&arr, 2, &off)); /* past the count */
  /* a root offset pointing out of the section */
  static const uint8_t b[] = {1 * 4 * 2, 200};
  struct nf_reader rb = {b, BASE, sizeof(b)};
  CHECK(nf_array_open(&rb, BASE, &arr));
  CHECK(!nf_array_get(&arr, 0, &off));
  /* entries with fixups: bit 0 set, bit 1 a backward offset follows */
  static const uint8_t e1[] = {(7 << 2 | 1) << 1}, e2[] = {(7 << 2 | 3) << 1, 0x08};
  struct nf_reader r1 = {e1, BASE, sizeof(e1)}, r2 = {e2, BASE, sizeof(e2)};
  CHECK(nf_method_entry(&r1, BASE, &block) && block == 7);
  CHECK(nf_method_entry(&r2, BASE, &block) && block == 7);
}

static void signatures(void) {
  struct r2r_method_sig sig;
  /* a method of Dictionary`2<int, module 1's class token 3> (owner
   * type), MethodDef row 0x1234 (two-byte form), instantiated over
   * string[] */
  static const uint8_t s1[] = {0x44, 0x15, 0x12, 0x08, 0x02, 0x08, 0x3f, 0x01,
                               0x12, 0x0c, 0x92, 0x34, 0x01, 0x1d, 0x0e, 0xaa};
  CHECK(r2r_method_sig_decode(s1, sizeof(s1), &sig));
  CHECK_EQ_INT(sig.rid, 0x1234);
  CHECK_EQ_INT(sig.length, sizeof(s1) - 1); /* the entry follows */
  CHECK(!sig.foreign);
  /* a MemberRef of another module's metadata (module override; flags
   * 0x90 take the two-byte form) */
  static const uint8_t s2[] = {0x80, 0x90, 0x02, 0x05};
  CHECK(r2r_method_sig_decode(s2, sizeof(s2), &sig));
  CHECK(sig.foreign);
  CHECK_EQ_INT(sig.length, 4);
  /* owner type with a function pointer and an array of rank 2 */
  static const uint8_t s3[] = {0x40, 0x15, 0x12, 0x04, 0x02, 0x1b, 0x00, 0x01, 0x01,
                               0x08, 0x14, 0x08, 0x02, 0x01, 0x05, 0x01, 0x00, 0x07};
  CHECK(r2r_method_sig_decode(s3, sizeof(s3), &sig));
  CHECK_EQ_INT(sig.rid, 7);
  /* refused: cut short, an unknown element type, a slot for a token,
   * nesting past the cap */
  CHECK(!r2r_method_sig_decode(s1, 9, &sig));
  static const uint8_t s4[] = {0x40, 0x33, 0x01};
  CHECK(!r2r_method_sig_decode(s4, sizeof(s4), &sig));
  static const uint8_t s5[] = {0x08, 0x01};
  CHECK(!r2r_method_sig_decode(s5, sizeof(s5), &sig));
  uint8_t deep[80];
  deep[0] = 0x40;
  memset(deep + 1, 0x1d, sizeof(deep) - 3); /* SZARRAY of SZARRAY of ... */
  deep[sizeof(deep) - 2] = 0x08;
  deep[sizeof(deep) - 1] = 0x01;
  CHECK(!r2r_method_sig_decode(deep, sizeof(deep), &sig));
}

int main(void) {
  integers();
  arrays();
  signatures();
  return pp_test_finish("test_pe_r2r_encoding");
}
