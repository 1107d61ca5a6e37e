/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The python plugin's readers against hostile "targets": fake CPython
 * objects built in this process's own memory and read back through
 * process_vm_readv on our own pid, exactly as a target would be read.
 * Strings of every kind and broken ones, code objects with the wrong type,
 * thread lists and frame chains with cycles: every case must end with an
 * error or a bounded result, never a hang or an overrun.
 */
#include <stdlib.h>
#include <unistd.h>

#include "../../plugins/python/asyncio.c"
#include "../../plugins/python/asyncio_awaiter.c"
#include "../../plugins/python/asyncio_debug.c"
#include "../../plugins/python/asyncio_objects.c"
#include "../../plugins/python/asyncio_waiting.c"
#include "../../plugins/python/codecache.c"
#include "../../plugins/python/debug_offsets.c"
#include "../../plugins/python/linetable.c"
#include "../../plugins/python/object_reader.c"
#include "../../plugins/python/offsets.c"
#include "../../plugins/python/opcodes.c"
#include "../../plugins/python/walk.c"
#include "python_self_proc.h"
#include "testlib.h"

/* A 3.12 str object: header (40 bytes ASCII / 56 compact) then data. */
static uint8_t *make_str312(const void *data, size_t len, unsigned kind, int ascii) {
  uint8_t *o = aligned_alloc(16, 256);
  memset(o, 0, 256);
  int64_t l = (int64_t)len;
  memcpy(o + 16, &l, 8);
  uint32_t state = (kind << 2) | (1u << 5) | ((unsigned)ascii << 6);
  memcpy(o + 32, &state, 4);
  memcpy(o + (ascii ? 40 : 56), data, len * kind);
  return o;
}

static void strings(void) {
  struct py_proc p = self_proc(3, 12);
  char out[64];
  uint8_t *a = make_str312("hello", 5, 1, 1);
  CHECK_EQ_INT(python_read_string(&p, (uint64_t)(uintptr_t)a, out, sizeof(out)), 5);
  CHECK_EQ_STR(out, "hello");
  const uint8_t latin[] = {'c', 0xe9}; /* "cé" as UCS1, not ASCII */
  uint8_t *b = make_str312(latin, 2, 1, 0);
  CHECK(python_read_string(&p, (uint64_t)(uintptr_t)b, out, sizeof(out)) > 0);
  CHECK_EQ_STR(out, "c\xc3\xa9");
  const uint16_t ucs2[] = {0x41f, 0x438}; /* "Пи" */
  uint8_t *c = make_str312(ucs2, 2, 2, 0);
  python_read_string(&p, (uint64_t)(uintptr_t)c, out, sizeof(out));
  CHECK_EQ_STR(out, "\xd0\x9f\xd0\xb8");
  const uint32_t ucs4[] = {0x1f4a9, 0xd800}; /* pile of poo, lone surrogate */
  uint8_t *d = make_str312(ucs4, 2, 4, 0);
  python_read_string(&p, (uint64_t)(uintptr_t)d, out, sizeof(out));
  CHECK_EQ_STR(out, "\xf0\x9f\x92\xa9\xef\xbf\xbd");
  /* truncated to the buffer, still terminated */
  char small[4];
  python_read_string(&p, (uint64_t)(uintptr_t)a, small, sizeof(small));
  CHECK_EQ_STR(small, "hel");
  /* hostile: bad kind, negative and huge lengths, ascii with kind 2, NULL,
   * misaligned and kernel pointers */
  uint32_t bad_state = (3u << 2) | (1u << 5);
  memcpy(a + 32, &bad_state, 4);
  CHECK(python_read_string(&p, (uint64_t)(uintptr_t)a, out, sizeof(out)) < 0);
  int64_t neg = -5, huge = 1ll << 40;
  memcpy(b + 16, &neg, 8);
  CHECK(python_read_string(&p, (uint64_t)(uintptr_t)b, out, sizeof(out)) < 0);
  memcpy(b + 16, &huge, 8);
  CHECK(python_read_string(&p, (uint64_t)(uintptr_t)b, out, sizeof(out)) < 0);
  uint32_t ascii2 = (2u << 2) | (1u << 5) | (1u << 6);
  memcpy(c + 32, &ascii2, 4);
  CHECK(python_read_string(&p, (uint64_t)(uintptr_t)c, out, sizeof(out)) < 0);
  CHECK(python_read_string(&p, 0, out, sizeof(out)) < 0);
  CHECK(python_read_string(&p, (uint64_t)(uintptr_t)d + 3, out, sizeof(out)) < 0);
  CHECK(python_read_string(&p, 0xffffffff81000000ull, out, sizeof(out)) < 0);
  CHECK(python_read_string(&p, 0x10, out, sizeof(out)) < 0); /* unmapped page 0 */
  free(a), free(b), free(c), free(d);
}

static void code_objects(void) {
  struct py_proc p = self_proc(3, 12);
  struct py_codecache *cc = python_codecache_new(64);
  uint8_t *name = make_str312("f", 1, 1, 1), *file = make_str312("t.py", 4, 1, 1);
  uint8_t *lt = aligned_alloc(16, 64);
  memset(lt, 0, 64);
  int64_t ltlen = 2;
  memcpy(lt + 16, &ltlen, 8);
  lt[32] = 0x80, lt[33] = 0x00;
  uint8_t *code = aligned_alloc(16, 256);
  memset(code, 0, 256);
  uint64_t fake_type = 0x1234560;
  p.pycode_type = fake_type;
  memcpy(code + 8, &fake_type, 8);
  uint64_t v;
  v = (uint64_t)(uintptr_t)name, memcpy(code + p.off.co_name, &v, 8);
  memcpy(code + p.off.co_qualname, &v, 8);
  v = (uint64_t)(uintptr_t)file, memcpy(code + p.off.co_filename, &v, 8);
  v = (uint64_t)(uintptr_t)lt, memcpy(code + p.off.co_linetable, &v, 8);
  int32_t first = 7;
  memcpy(code + p.off.co_firstlineno, &first, 4);
  int err = 0;
  struct py_code *e = python_code_get(cc, &p, (uint64_t)(uintptr_t)code, &err);
  CHECK(e != NULL);
  if (e) {
    CHECK_EQ_STR(e->name, "f");
    CHECK_EQ_STR(e->file, "t.py");
    CHECK_EQ_INT(e->firstlineno, 7);
    CHECK_EQ_INT(python_code_line(e, PY_LT_311, 0), 7);
  }
  /* the same address again: a hit */
  CHECK(python_code_get(cc, &p, (uint64_t)(uintptr_t)code, &err) == e);
  /* a new session, and the object was replaced by something that is not a
   * code object: the stale entry must not be trusted */
  python_codecache_new_gen(cc);
  uint64_t other_type = 0x999990;
  memcpy(code + 8, &other_type, 8);
  CHECK(python_code_get(cc, &p, (uint64_t)(uintptr_t)code, &err) == NULL);
  CHECK(err < 0);
  /* garbage pointers */
  CHECK(python_code_get(cc, &p, 0, &err) == NULL);
  CHECK(python_code_get(cc, &p, 12345, &err) == NULL);
  python_codecache_free(cc);
  free(name), free(file), free(lt), free(code);
}

/* A 3.12 code object named name in our own memory (its type is fake_type). */
static uint8_t *fake_code(const struct py_proc *p, uint64_t fake_type, uint8_t *name, uint8_t *file,
                          uint8_t *lt) {
  uint8_t *code = aligned_alloc(16, 256);
  memset(code, 0, 256);
  memcpy(code + 8, &fake_type, 8);
  uint64_t v = (uint64_t)(uintptr_t)name;
  memcpy(code + p->off.co_name, &v, 8);
  memcpy(code + p->off.co_qualname, &v, 8);
  v = (uint64_t)(uintptr_t)file, memcpy(code + p->off.co_filename, &v, 8);
  v = (uint64_t)(uintptr_t)lt, memcpy(code + p->off.co_linetable, &v, 8);
  int32_t first = 1;
  memcpy(code + p->off.co_firstlineno, &first, 4);
  return code;
}

/* Frames point to cache entries until their sample is handed on: an entry
 * the current sample used is never the one evicted (it would rename a
 * frame already read). One set of 4 ways, five code objects. */
static void code_cache_pins_sample(void) {
  struct py_proc p = self_proc(3, 12);
  struct py_codecache *cc = python_codecache_new(4);
  p.pycode_type = 0x1234560;
  uint8_t *file = make_str312("t.py", 4, 1, 1);
  uint8_t *lt = aligned_alloc(16, 64);
  memset(lt, 0, 64);
  uint8_t *names[5], *codes[5];
  struct py_code *got[5];
  char nm[2] = "a";
  for (int i = 0; i < 5; i++) {
    nm[0] = (char)('a' + i);
    names[i] = make_str312(nm, 1, 1, 1);
    codes[i] = fake_code(&p, p.pycode_type, names[i], file, lt);
  }
  int err = 0;
  python_codecache_begin_sample(cc);
  for (int i = 0; i < 4; i++) {
    got[i] = python_code_get(cc, &p, (uint64_t)(uintptr_t)codes[i], &err);
    CHECK(got[i] != NULL);
  }
  /* the fifth, in the same sample: nothing of it may be evicted */
  CHECK(python_code_get(cc, &p, (uint64_t)(uintptr_t)codes[4], &err) == NULL);
  CHECK_EQ_INT(err, -ENOSPC);
  for (int i = 0; i < 4; i++) {
    nm[0] = (char)('a' + i);
    if (got[i]) CHECK_EQ_STR(got[i]->name, nm);
  }
  /* the next sample may evict the least recently used (a) */
  python_codecache_begin_sample(cc);
  got[4] = python_code_get(cc, &p, (uint64_t)(uintptr_t)codes[4], &err);
  CHECK(got[4] != NULL);
  if (got[4]) CHECK_EQ_STR(got[4]->name, "e");
  if (got[1]) CHECK_EQ_STR(got[1]->name, "b");
  python_codecache_free(cc);
  for (int i = 0; i < 5; i++)
    free(names[i]), free(codes[i]);
  free(file), free(lt);
}

static void noop_stack(void *ctx, uint32_t tid, const struct py_frame_ref *f, uint32_t n,
                       bool truncated) {
  (void)tid, (void)f, (void)truncated;
  *(uint32_t *)ctx += n;
}

/* 3.9 layout: interp {next@0, tstate_head@8}; tstate {next@8, interp@16,
 * frame@24}; frame {f_back@24, f_code@32}. */
static void cycles(void) {
  struct py_proc p = self_proc(3, 9);
  struct py_codecache *cc = python_codecache_new(64);
  struct py_walker *w = python_walker_new(64);
  uint8_t *interp = aligned_alloc(16, 512), *ts1 = aligned_alloc(16, 512),
          *ts2 = aligned_alloc(16, 512);
  memset(interp, 0, 512), memset(ts1, 0, 512), memset(ts2, 0, 512);
  uint64_t head = (uint64_t)(uintptr_t)interp, v;
  p.interp_head = (uint64_t)(uintptr_t)&head;
  v = (uint64_t)(uintptr_t)ts1, memcpy(interp + 8, &v, 8);
  memcpy(ts1 + 16, &head, 8), memcpy(ts2 + 16, &head, 8);
  /* thread list ts1 -> ts2 -> ts1 */
  v = (uint64_t)(uintptr_t)ts2, memcpy(ts1 + 8, &v, 8);
  v = (uint64_t)(uintptr_t)ts1, memcpy(ts2 + 8, &v, 8);
  struct py_sample_result res;
  uint32_t frames = 0;
  int rc = python_sample(w, &p, cc, PY_ALL_THREADS, NULL, noop_stack, &frames, &res);
  CHECK_EQ_INT(rc, -ELOOP);
  /* interpreter list that loops on itself */
  memset(ts1 + 8, 0, 8);
  memcpy(interp + 0, &head, 8);
  rc = python_sample(w, &p, cc, PY_ALL_THREADS, NULL, noop_stack, &frames, &res);
  CHECK_EQ_INT(rc, -ELOOP);
  memset(interp, 0, 8);
  /* a frame chain A -> B -> A whose code is garbage: the thread fails, no
   * stack is emitted, the sample returns */
  uint8_t *fa = aligned_alloc(16, 512), *fb = aligned_alloc(16, 512);
  memset(fa, 0, 512), memset(fb, 0, 512);
  v = (uint64_t)(uintptr_t)fb, memcpy(fa + 24, &v, 8);
  v = (uint64_t)(uintptr_t)fa, memcpy(fb + 24, &v, 8);
  v = (uint64_t)(uintptr_t)fa, memcpy(ts1 + 24, &v, 8);
  rc = python_sample(w, &p, cc, PY_ALL_THREADS, NULL, noop_stack, &frames, &res);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(res.failed, 1);
  CHECK_EQ_INT(frames, 0);
  /* a thread state that does not point back at its interpreter */
  memset(ts1 + 16, 0, 8);
  rc = python_sample(w, &p, cc, PY_ALL_THREADS, NULL, noop_stack, &frames, &res);
  CHECK_EQ_INT(rc, -EINVAL);
  python_walker_free(w);
  python_codecache_free(cc);
  free(interp), free(ts1), free(ts2), free(fa), free(fb);
}

/* Versions and builds that must be refused rather than guessed. */
static void refusals(void) {
  struct py_offsets o;
  CHECK_EQ_INT(python_offsets_for(3, 5, 0, &o), -ENOTSUP);
  CHECK_EQ_INT(python_offsets_for(2, 6, 0, &o), -ENOTSUP);
  CHECK_EQ_INT(python_offsets_for(4, 0, 0, &o), -ENOTSUP);
  /* 3.14+: the shape only, whether _Py_DebugOffsets fit decides */
  for (int m = 6; m <= 16; m++)
    CHECK_EQ_INT(python_offsets_for(3, m, 0, &o), 0);
  /* _Py_DebugOffsets: CPython 3.13.0's values, then broken copies */
  uint8_t d[PY_DEBUG_OFFSETS_READ];
  memset(d, 0, sizeof(d));
  memcpy(d, "xdebugpy", 8);
  uint64_t v = 0x030D00F0;
  memcpy(d + 8, &v, 8);
  const uint64_t fields[][2] = {{40, 632},
                                {64, 7264},
                                {72, 7344},
                                {112, 16},
                                {120, 7752},
                                {136, 7768},
                                {144, 7760},
                                {168, 8},
                                {176, 16},
                                {184, 72},
                                {192, 152},
                                {200, 160},
                                {208, 232},
                                {224, 80},
                                {232, 8},
                                {240, 0},
                                {248, 56},
                                {264, 70},
                                {280, 112},
                                {288, 120},
                                {296, 128},
                                {304, 136},
                                {312, 68},
                                {344, 200},
                                {560, 40},
                                /* sizes the parser checks the offsets against */
                                {24, 283320},
                                {48, 194968},
                                {152, 304},
                                {272, 208},
                                {352, 16},
                                {360, 8},
                                {512, 40},
                                {520, 16},
                                {528, 32},
                                {536, 64},
                                {544, 32},
                                {552, 16}};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
    memcpy(d + fields[i][0], &fields[i][1], 8);
  python_offsets_for(3, 13, 0, &o);
  struct py_offsets fromdbg = o;
  char why[160];
  CHECK_EQ_INT(python_offsets_from_debug(d, sizeof(d), &fromdbg, why, sizeof(why)), 0);
  CHECK_EQ_INT(fromdbg.is_tstate_head, o.is_tstate_head); /* agrees with the static table */
  CHECK_EQ_INT(fromdbg.ts_frame, o.ts_frame);
  CHECK_EQ_INT(fromdbg.co_code_adaptive, o.co_code_adaptive);
  CHECK_EQ_INT(fromdbg.gil_holder, 8);
  CHECK_EQ_INT(fromdbg.gil_locked, 16);
  uint64_t one = 1, huge = 1ull << 40, v14 = 0x030E00F0;
  uint8_t bad[PY_DEBUG_OFFSETS_READ];
  memcpy(bad, d, sizeof(bad));
  memcpy(bad + 16, &one, 8); /* free-threaded 3.13 */
  CHECK_EQ_INT(python_offsets_from_debug(bad, sizeof(bad), &fromdbg, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "free-threaded 3.13 is not read") != NULL);
  memcpy(bad, d, sizeof(bad));
  memcpy(bad + 8, &v14, 8); /* 3.14 layout differs */
  CHECK_EQ_INT(python_offsets_from_debug(bad, sizeof(bad), &fromdbg, why, sizeof(why)), -EINVAL);
  memcpy(bad, d, sizeof(bad));
  memcpy(bad + 184, &huge, 8); /* absurd offset */
  CHECK_EQ_INT(python_offsets_from_debug(bad, sizeof(bad), &fromdbg, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "thread_state.current_frame") != NULL);
  memcpy(bad, d, sizeof(bad));
  bad[0] = 'X'; /* cookie */
  CHECK_EQ_INT(python_offsets_from_debug(bad, sizeof(bad), &fromdbg, why, sizeof(why)), -EINVAL);
  CHECK_EQ_INT(python_offsets_from_debug(d, 100, &fromdbg, why, sizeof(why)), -EINVAL); /* short */
  memcpy(bad, d, sizeof(bad));
  uint64_t small = 100;
  memcpy(bad + 152, &small, 8); /* thread_state.size below its fields */
  CHECK_EQ_INT(python_offsets_from_debug(bad, sizeof(bad), &fromdbg, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "thread_state.thread_id (152) beyond") != NULL);
}

int main(void) {
  refusals();
  strings();
  code_objects();
  code_cache_pins_sample();
  cycles();
  return pp_test_finish("test_python_remote");
}
