/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The python plugin's line-table decoders (plugins/python/linetable.c)
 * against literal tables taken from real code objects of CPython 2.7, 3.8,
 * 3.10, 3.11, 3.12 and 3.13, and against hostile tables.
 *
 * The source of every table (first line 1):
 *
 *   def f(a):
 *       x = [i
 *            for i in a
 *            if i]
 *       y = 1
 *       <140 blank lines>
 *       return (x,
 *               y)
 *
 * which has negative line deltas (the comprehension) and a jump of 141
 * lines (unsigned 0x8d in 2.7's lnotab, split 127 + 14 from 3.6 on). The
 * expected lines are what the interpreter itself reports
 * (dis.findlinestarts <= 3.9, co_lines() 3.10+), recorded by running each
 * version; a range with no line (None) is expected to give the first line.
 */
#include <stdlib.h>

#include "../../plugins/python/linetable.c"
#include "testlib.h"

struct pt {
  int addr, line;
};

struct table {
  const char *version;
  int fmt, first;
  uint8_t bytes[80];
  size_t len;
  struct pt pts[16];
  size_t npts;
  int end; /* one past the last address */
};

static const struct table tables[] = {
    {"2.7.18",
     PY_LT_LNOTAB_U8,
     1,
     {0x00, 0x01, 0x03, 0x01, 0x0a, 0x01, 0x12, 0x01, 0x06, 0x8d, 0x03, 0x01},
     12,
     {{0, 2}, {3, 3}, {13, 4}, {31, 5}, {37, 146}, {40, 147}},
     6,
     48},
    {"3.8.18",
     PY_LT_LNOTAB_S8,
     1,
     {0x00, 0x01, 0x06, 0x01, 0x02, 0xff, 0x06, 0x03, 0x04, 0x7f, 0x00, 0x0e, 0x02, 0x01, 0x02,
      0xff},
     16,
     {{0, 2}, {6, 3}, {8, 2}, {14, 5}, {18, 146}, {20, 147}, {22, 146}},
     7,
     24},
    {"3.10.13",
     PY_LT_310,
     1,
     {0x06, 0x01, 0x02, 0x01, 0x06, 0xff, 0x04, 0x03, 0x00, 0x7f, 0x02, 0x0e, 0x02, 0x01, 0x04,
      0xff},
     16,
     {{0, 2}, {6, 3}, {8, 2}, {14, 5}, {18, 146}, {20, 147}, {22, 146}},
     7,
     26},
    {"3.11.7",
     PY_LT_311,
     1,
     {0x80, 0x00, 0xf0, 0x02, 0x02, 0x09, 0x0f, 0xf0, 0x00, 0x02, 0x09, 0x0f, 0xd8, 0x12, 0x13,
      0xf0, 0x03, 0x02, 0x09, 0x0f, 0xf1, 0x00, 0x02, 0x09, 0x0f, 0xf4, 0x00, 0x02, 0x09, 0x0f,
      0x80, 0x41, 0xf0, 0x06, 0x00, 0x09, 0x0a, 0x80, 0x41, 0xf0, 0x5a, 0x04, 0x00, 0x0d, 0x0e,
      0xd8, 0x0c, 0x0d, 0xf0, 0x03, 0x01, 0x0c, 0x0f, 0xf0, 0x00, 0x01, 0x05, 0x0f},
     58,
     {{0, 1}, {1, 2}, {3, 3}, {4, 2}, {13, 5}, {15, 146}, {16, 147}, {17, 146}},
     8,
     19},
    {"3.12.1",
     PY_LT_311,
     1,
     {0x80, 0x00, 0xe0, 0x12, 0x13, 0xf6, 0x03, 0x02, 0x09, 0x0f, 0xd8, 0x0d, 0x0e, 0xd9,
      0x0c, 0x0d, 0xf2, 0x05, 0x00, 0x0a, 0x0b, 0xf0, 0x00, 0x02, 0x09, 0x0f, 0x80, 0x41,
      0xf0, 0x00, 0x02, 0x09, 0x0f, 0xf0, 0x06, 0x00, 0x09, 0x0a, 0x80, 0x41, 0xf0, 0x5a,
      0x04, 0x00, 0x0d, 0x0e, 0xd8, 0x0c, 0x0d, 0xf0, 0x03, 0x01, 0x0c, 0x0f, 0xf0, 0x00,
      0x01, 0x05, 0x0f, 0xf9, 0xf2, 0x61, 0x04, 0x02, 0x09, 0x0f},
     66,
     {{0, 1},
      {1, 3},
      {2, 2},
      {9, 3},
      {10, 4},
      {12, 2},
      {18, 5},
      {20, 146},
      {21, 147},
      {22, 146},
      {24, -1},
      {26, 2}},
     12,
     27},
    {"3.13.0",
     PY_LT_311,
     1,
     {0x80, 0x00, 0xe1, 0x12, 0x13, 0xf3, 0x03, 0x02, 0x09, 0x0f, 0xd9, 0x12, 0x13, 0x88,
      0x51, 0xdc, 0x0c, 0x0d, 0xf7, 0x05, 0x00, 0x0a, 0x0b, 0xd9, 0x12, 0x13, 0xf0, 0x03,
      0x00, 0x05, 0x06, 0xf0, 0x00, 0x02, 0x09, 0x0f, 0xf0, 0x06, 0x00, 0x09, 0x0a, 0x80,
      0x41, 0xf0, 0x5a, 0x04, 0x00, 0x0d, 0x0e, 0xd8, 0x0c, 0x0d, 0xf0, 0x03, 0x01, 0x0c,
      0x0f, 0xf0, 0x00, 0x01, 0x05, 0x0f, 0xf9, 0xf2, 0x61, 0x04, 0x02, 0x09, 0x0f},
     69,
     {{0, 1},
      {1, 3},
      {3, 2},
      {7, 3},
      {10, 4},
      {15, 2},
      {23, 3},
      {25, 2},
      {27, 5},
      {29, 146},
      {30, 147},
      {31, 146},
      {33, -1},
      {35, 2}},
     14,
     36},
};

/* Every address of every range maps to the range's line. */
static void real_tables(void) {
  for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
    const struct table *tb = &tables[t];
    for (size_t i = 0; i < tb->npts; i++) {
      int hi = i + 1 < tb->npts ? tb->pts[i + 1].addr : tb->end;
      int want = tb->pts[i].line < 0 ? tb->first : tb->pts[i].line;
      for (int a = tb->pts[i].addr; a < hi; a++) {
        int got = python_line_for(tb->fmt, tb->bytes, tb->len, tb->first, a);
        if (got != want)
          fprintf(stderr, "%s: addr %d: line %d, expected %d\n", tb->version, a, got, want);
        CHECK_EQ_INT(got, want);
      }
    }
    /* a frame that has not started yet: the first line */
    CHECK_EQ_INT(python_line_for(tb->fmt, tb->bytes, tb->len, tb->first, -1), tb->first);
  }
}

/* 2.7 line increments are unsigned: 0x8d is +141, not -115. */
static void lnotab_sign(void) {
  const uint8_t t[] = {0x00, 0x01, 0x06, 0x8d};
  CHECK_EQ_INT(python_line_for(PY_LT_LNOTAB_U8, t, sizeof(t), 10, 7), 152);
  CHECK_EQ_INT(python_line_for(PY_LT_LNOTAB_S8, t, sizeof(t), 10, 7), 11 - 115);
}

/* 3.10: -128 marks a range without a line; later ranges still accumulate. */
static void linetable310_no_line(void) {
  const uint8_t t[] = {0x04, 0x01, 0x04, 0x80, 0x04, 0x02};
  CHECK_EQ_INT(python_line_for(PY_LT_310, t, sizeof(t), 5, 2), 6);
  CHECK_EQ_INT(python_line_for(PY_LT_310, t, sizeof(t), 5, 5), 5);
  CHECK_EQ_INT(python_line_for(PY_LT_310, t, sizeof(t), 5, 9), 8);
  CHECK_EQ_INT(python_line_for(PY_LT_310, t, sizeof(t), 5, 12), 5); /* past the end */
}

/* Hostile tables: truncated entries, endless varints, garbage, huge
 * addresses. Any answer is fine as long as it is bounded and in range. */
static void hostile(void) {
  uint8_t buf[4096];
  const uint8_t endless[] = {0xf0, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
  CHECK_EQ_INT(python_line_for(PY_LT_311, endless, sizeof(endless), 3, 0), 3);
  const uint8_t cut_long[] = {0xf0}; /* LONG without its varints */
  CHECK_EQ_INT(python_line_for(PY_LT_311, cut_long, sizeof(cut_long), 3, 0), 3);
  const uint8_t cut_short[] = {0xd8}; /* ONE_LINE1 without its column bytes */
  int l = python_line_for(PY_LT_311, cut_short, sizeof(cut_short), 3, 0);
  CHECK(l == 3 || l == 4);
  const uint8_t not_entry[] = {0x05, 0x05};
  CHECK_EQ_INT(python_line_for(PY_LT_311, not_entry, sizeof(not_entry), 3, 0), 3);
  CHECK_EQ_INT(python_line_for(PY_LT_311, NULL, 0, 3, 0), 3);
  CHECK_EQ_INT(python_line_for(99, buf, 0, 3, 0), 3);
  const uint8_t odd[] = {0x02, 0x01, 0x02};
  CHECK_EQ_INT(python_line_for(PY_LT_LNOTAB_S8, odd, sizeof(odd), 3, 100), 4);
  srand(42);
  for (int round = 0; round < 2000; round++) {
    size_t n = (size_t)(rand() % (int)sizeof(buf));
    for (size_t i = 0; i < n; i++)
      buf[i] = (uint8_t)rand();
    for (int fmt = 0; fmt <= PY_LT_311; fmt++) {
      int64_t addrq = round % 3 == 0 ? INT64_MAX : rand() % 100000;
      (void)python_line_for(fmt, buf, n, 1, addrq);
    }
  }
  /* a table claiming more than the cap is read only up to the cap */
  uint8_t *big = calloc(PY_LINETABLE_MAX * 2, 1);
  if (big) {
    for (size_t i = 0; i < PY_LINETABLE_MAX * 2; i += 2)
      big[i] = 1, big[i + 1] = 1;
    CHECK_EQ_INT(python_line_for(PY_LT_LNOTAB_S8, big, PY_LINETABLE_MAX * 2, 0, 1 << 30),
                 PY_LINETABLE_MAX / 2);
    free(big);
  }
  CHECK(1);
}

int main(void) {
  real_tables();
  lnotab_sign();
  linetable310_no_line();
  hostile();
  return pp_test_finish("test_python_linetable");
}
