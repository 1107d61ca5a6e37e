/* SPDX-License-Identifier: Apache-2.0 */
/* The ruby plugin's decoders, run against objects laid out in this test's
 * own memory (process_vm_readv on ourselves): the succinct bit-vector line
 * table built exactly as Ruby's iseq.c builds it, the 2.5 position table,
 * RString in both layouts (embedded / heap), RArray, hostile lengths and
 * types; and the bounded frame tables (interning, frames, cache). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../plugins/ruby/ruby_frame_cache.c"
#include "../../plugins/ruby/ruby_layout.c"
#include "../../plugins/ruby/ruby_objects.c"
#include "testlib.h"

/* Ruby's struct succ_index_table (iseq.c) */
struct succ_block {
  uint32_t rank;
  uint64_t small_block_ranks;
  uint64_t bits[8];
};
struct succ_table {
  uint64_t imm_part[6];
  struct succ_block succ_part[4];
};

static void build_succ(struct succ_table *sd, const uint32_t *data, uint32_t size) {
  memset(sd, 0, sizeof(*sd));
  uint32_t r = 0;
  for (int j = 0; j < 6; j++)
    for (int i = 0; i < 9; i++) {
      if (r < size && data[r] == (uint32_t)(j * 9 + i)) r++;
      sd->imm_part[j] |= (uint64_t)r << (7 * i);
    }
  for (int k = 0; k < 4; k++) {
    struct succ_block *b = &sd->succ_part[k];
    uint32_t small = 0;
    b->rank = r;
    for (int j = 0; j < 8; j++) {
      uint64_t bits = 0;
      if (j) b->small_block_ranks |= (uint64_t)small << (9 * (j - 1));
      for (int i = 0; i < 64; i++)
        if (r < size && data[r] == (uint32_t)(k * 512 + j * 64 + i + 54)) {
          bits |= 1ull << i;
          r++;
        }
      b->bits[j] = bits;
      small += (uint32_t)__builtin_popcountll(bits);
    }
  }
}

static struct ruby_target self_target(const char *version) {
  struct ruby_target t = {.pid = (uint32_t)getpid()};
  t.L = ruby_layout_for(version, NULL);
  return t;
}

static void put64(unsigned char *b, size_t off, uint64_t v) {
  memcpy(b + off, &v, 8);
}
static void put32(unsigned char *b, size_t off, uint32_t v) {
  memcpy(b + off, &v, 4);
}

static void test_succinct_lines(void) {
  static const uint32_t pos[] = {0, 3, 7, 20, 53, 54, 60, 117, 118, 566, 600, 1100, 1500};
  enum { N = sizeof(pos) / sizeof(pos[0]) };
  struct {
    int32_t line_no, node_id;
    uint32_t events;
  } entries[N];
  for (int i = 0; i < N; i++)
    entries[i].line_no = 100 + i, entries[i].node_id = i, entries[i].events = 0;
  static struct succ_table sd;
  build_succ(&sd, pos, N);
  static uint64_t encoded[2000];
  struct ruby_target t = self_target("3.1.2");
  unsigned char body[256] = {0};
  put32(body, 4, 2000); /* iseq_size */
  put64(body, 8, (uint64_t)(uintptr_t)encoded);
  put64(body, (size_t)t.L->ii_body, (uint64_t)(uintptr_t)entries);
  put32(body, (size_t)t.L->ii_size, N);
  put64(body, (size_t)t.L->ii_succ, (uint64_t)(uintptr_t)&sd);
  int bad = 0;
  for (uint32_t p = 0; p < 1900; p++) {
    uint32_t idx = 0;
    while (idx < N && pos[idx] <= p)
      idx++;
    uint64_t pc = (uint64_t)(uintptr_t)encoded + (p + 1) * 8ull; /* pc is past the insn */
    uint32_t got = ruby_line_of(&t, body, sizeof(body), pc);
    if (got != (uint32_t)(100 + idx - 1)) {
      if (bad++ < 5) fprintf(stderr, "pos %u: line %u, expected %u\n", p, got, 100 + idx - 1);
    }
  }
  CHECK_EQ_INT(bad, 0);
  /* the same lookups in the split form the batched resolver uses: table
   * parsed once, the index bytes and the line read by the caller */
  struct ruby_lines ln;
  CHECK(ruby_lines_parse(&t, body, sizeof(body), &ln));
  CHECK(ruby_lines_has(&ln, (uint64_t)(uintptr_t)encoded + 8 * 2000));
  CHECK(!ruby_lines_has(&ln, (uint64_t)(uintptr_t)encoded + 8 * 2001));
  CHECK(!ruby_lines_has(&ln, (uint64_t)(uintptr_t)encoded - 8));
  bad = 0;
  for (uint32_t p = 0; p < 1900; p++) {
    uint64_t pc = (uint64_t)(uintptr_t)encoded + (p + 1) * 8ull;
    int64_t at = ruby_lines_pos(&ln, pc);
    uint64_t addr = 0;
    uint32_t len = 0;
    unsigned char buf[80];
    int32_t line = 0;
    if (at >= 0) ruby_lines_succ_read(&ln, (uint64_t)at, &addr, &len);
    if (len && len <= sizeof(buf) && pp_remote_read(getpid(), addr, buf, len) == 0) {
      uint64_t la =
          ruby_lines_entry_line(&t, &ln, ruby_lines_succ_index(&ln, (uint64_t)at, buf, len));
      if (la) pp_remote_read(getpid(), la, &line, sizeof(line));
    }
    if (line != (int32_t)ruby_line_of(&t, body, sizeof(body), pc) || at != (int64_t)p) {
      if (bad++ < 5) fprintf(stderr, "split lookup, pos %u: line %d\n", p, line);
    }
  }
  CHECK_EQ_INT(bad, 0);
  /* a truncated index read and an index past the table are refused */
  CHECK_EQ_INT((int)ruby_lines_succ_index(&ln, 100, (const unsigned char *)&sd, 8), 0);
  CHECK_EQ_INT((int)ruby_lines_entry_line(&t, &ln, N + 1), 0);
  CHECK_EQ_INT((int)ruby_lines_entry_line(&t, &ln, 0), 0);
  /* pc at the start of the iseq (pos 0), past the end, before it, NULL */
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), (uint64_t)(uintptr_t)encoded), 100);
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), (uint64_t)(uintptr_t)encoded + 8 * 5000), 0);
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), (uint64_t)(uintptr_t)encoded - 8), 0);
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), 0), 0);
  /* hostile sizes and pointers */
  put32(body, (size_t)t.L->ii_size, 1u << 30);
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), (uint64_t)(uintptr_t)encoded + 16), 0);
  put32(body, (size_t)t.L->ii_size, 1);
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), (uint64_t)(uintptr_t)encoded + 800), 100);
  put32(body, (size_t)t.L->ii_size, N);
  put64(body, (size_t)t.L->ii_succ, 8); /* unmapped */
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), (uint64_t)(uintptr_t)encoded + 800), 0);
  CHECK_EQ_INT(ruby_line_of(&t, body, 16, (uint64_t)(uintptr_t)encoded + 8), 0); /* short body */
}

static void test_positions_lines(void) {
  /* 2.5: {position, line_no, events}, scanned for the last position <= pos */
  static const uint32_t pos[] = {0, 4, 9, 130};
  struct {
    uint32_t position;
    int32_t line_no;
    uint32_t events;
  } entries[4];
  for (int i = 0; i < 4; i++)
    entries[i].position = pos[i], entries[i].line_no = 7 + i, entries[i].events = 0;
  static uint64_t encoded[200];
  struct ruby_target t = self_target("2.5.9");
  unsigned char body[256] = {0};
  put32(body, 4, 200);
  put64(body, 8, (uint64_t)(uintptr_t)encoded);
  put64(body, (size_t)t.L->ii_body, (uint64_t)(uintptr_t)entries);
  put32(body, (size_t)t.L->ii_size, 4);
  uint64_t e = (uint64_t)(uintptr_t)encoded;
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), e + 8 * 1), 7);    /* pos 0 */
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), e + 8 * 5), 8);    /* pos 4 */
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), e + 8 * 9), 8);    /* pos 8 */
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), e + 8 * 10), 9);   /* pos 9 */
  CHECK_EQ_INT(ruby_line_of(&t, body, sizeof(body), e + 8 * 150), 10); /* pos 149 */
}

/* An RString in 3.1's layout: flags, klass, then embedded chars or
 * {len, ptr}. Objects are 40-byte aligned slots in Ruby: so are these. */
static void test_strings(void) {
  struct ruby_target t31 = self_target("3.1.2"), t33 = self_target("3.3.0");
  static uint64_t obj[8];
  char buf[64];
  memset(obj, 0, sizeof(obj));
  obj[0] = 0x05 | (5ull << 14); /* T_STRING, embedded length 5 */
  memcpy(&obj[2], "hello", 5);
  CHECK_EQ_INT(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)), 5);
  CHECK_EQ_STR(buf, "hello");
  /* heap string, control characters replaced, truncated to the buffer */
  static char heap[] = "/app/a\nb.rb";
  obj[0] = 0x05 | (1ull << 13);
  obj[2] = strlen(heap);
  obj[3] = (uint64_t)(uintptr_t)heap;
  CHECK_EQ_INT(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)), 11);
  CHECK_EQ_STR(buf, "/app/a?b.rb");
  CHECK_EQ_INT(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj, buf, 5), 4);
  CHECK_EQ_STR(buf, "/app");
  /* hostile: wrong type, absurd length, embedded length beyond the slot */
  obj[0] = 0x07 | (1ull << 13);
  CHECK(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)) < 0);
  obj[0] = 0x05 | (1ull << 13);
  obj[2] = 1ull << 40;
  CHECK(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)) < 0);
  obj[0] = 0x05 | (31ull << 14);
  CHECK(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)) < 0);
  CHECK(ruby_read_string(&t31, 8, buf, sizeof(buf)) < 0);
  CHECK(ruby_read_string(&t31, (uint64_t)(uintptr_t)obj + 3, buf, sizeof(buf)) < 0);
  /* 3.3: length field at +16 for both, embedded chars at +24 (VWA: may run
   * past the first 40 bytes) */
  memset(obj, 0, sizeof(obj));
  obj[0] = 0x05;
  obj[2] = 30;
  memcpy(&obj[3], "block (2 levels) in <main> abc", 30);
  CHECK_EQ_INT(ruby_read_string(&t33, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)), 30);
  CHECK_EQ_STR(buf, "block (2 levels) in <main> abc");
  obj[2] = 4;
  CHECK_EQ_INT(ruby_read_string(&t33, (uint64_t)(uintptr_t)obj, buf, sizeof(buf)), 4);
  CHECK_EQ_STR(buf, "bloc");
}

static void test_arrays(void) {
  struct ruby_target t = self_target("3.1.2");
  static uint64_t arr[6], elems[3] = {11, 22, 33};
  uint64_t v = 0;
  arr[0] = 0x07 | (1ull << 13) | (2ull << 15); /* embedded, 2 elements */
  arr[2] = 5;
  arr[3] = 6;
  CHECK_EQ_INT(ruby_array_at(&t, (uint64_t)(uintptr_t)arr, 1, &v), 0);
  CHECK_EQ_INT(v, 6);
  CHECK_EQ_INT(ruby_array_at(&t, (uint64_t)(uintptr_t)arr, 2, &v), -ERANGE);
  arr[0] = 0x07; /* heap: len +16, ptr +32 */
  arr[2] = 3;
  arr[4] = (uint64_t)(uintptr_t)elems;
  CHECK_EQ_INT(ruby_array_at(&t, (uint64_t)(uintptr_t)arr, 2, &v), 0);
  CHECK_EQ_INT(v, 33);
  arr[2] = 1ull << 40;
  CHECK(ruby_array_at(&t, (uint64_t)(uintptr_t)arr, 2, &v) < 0);
  arr[0] = 0x05;
  CHECK(ruby_array_at(&t, (uint64_t)(uintptr_t)arr, 0, &v) < 0);
}

static void test_tables(void) {
  struct ruby_strings s;
  CHECK_EQ_INT(ruby_strings_init(&s, 64), 0);
  uint32_t a = ruby_strings_intern(&s, "spin", 4), b = ruby_strings_intern(&s, "spin", 4);
  CHECK(a != RUBY_NO_ID && a == b);
  CHECK_EQ_STR(ruby_strings_get(&s, a), "spin");
  CHECK(ruby_strings_intern(&s, "spi", 3) != a);
  char big[100];
  memset(big, 'x', sizeof(big));
  CHECK_EQ_INT(ruby_strings_intern(&s, big, sizeof(big)), RUBY_NO_ID); /* arena bound */
  ruby_strings_clear(&s);
  CHECK(ruby_strings_get(&s, a) == NULL);
  ruby_strings_free(&s);

  struct ruby_frames f;
  CHECK_EQ_INT(ruby_frames_init(&f, 2), 0);
  struct ruby_frame f1 = {1, 2, 3, 9}, f2 = {1, 2, 4, 9}, f3 = {5, 2, 4, 9};
  uint32_t i1 = ruby_frames_add(&f, &f1);
  CHECK_EQ_INT(ruby_frames_add(&f, &f1), i1);
  CHECK(ruby_frames_add(&f, &f2) != i1);
  CHECK_EQ_INT(ruby_frames_add(&f, &f3), RUBY_NO_ID); /* capacity 2 */
  ruby_frames_free(&f);

  struct ruby_cache c;
  CHECK_EQ_INT(ruby_cache_init(&c, 16), 0);
  ruby_cache_put(&c, 1, 0x1000, 0x2000, 7);
  CHECK_EQ_INT(ruby_cache_get(&c, 1, 0x1000, 0x2000), 7);
  CHECK_EQ_INT(ruby_cache_get(&c, 2, 0x1000, 0x2000), RUBY_NO_ID);
  for (uint32_t i = 0; i < 100; i++)
    ruby_cache_put(&c, 1, i, i, i); /* clears when full */
  CHECK(c.used <= c.cap / 4 * 3);
  CHECK_EQ_INT(ruby_cache_get(&c, 1, 99, 99), 99);
  ruby_cache_forget_pid(&c, 1);
  CHECK_EQ_INT(ruby_cache_get(&c, 1, 99, 99), RUBY_NO_ID);
  ruby_cache_free(&c);
}

int main(void) {
  test_succinct_lines();
  test_positions_lines();
  test_strings();
  test_arrays();
  test_tables();
  return pp_test_finish("test_ruby_objects");
}
