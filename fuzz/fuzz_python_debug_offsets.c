/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the python plugin's parser of CPython's _Py_DebugOffsets
 * (plugins/python/debug_offsets.c, and locate.c's version handling
 * around it). The input is the struct as a target's _PyRuntime begins
 * with it: cookie, version word, free_threaded flag, then every size and
 * offset, all hostile. A struct that is accepted must leave offsets the
 * walker can use without reading past the fixed buffers it reads each
 * struct into, whatever the layout (3.13, 3.14, 3.15, a newer minor read
 * as the newest) and build (default or free-threaded). Seeds are the
 * structs of the synthetic 3.13-3.16 images of test_python_synthetic
 * (PP_PY_DEBUG_SEEDS=DIR) and of a real 3.13.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "python.h"

static void check(const struct py_offsets *o) {
  if (o->ts_read > PY_TSTATE_READ_MAX || o->fr_read > PY_FRAME_READ_MAX ||
      o->co_read > PY_CODE_READ_MAX)
    abort();
  /* every field the walker reads lies inside the struct copy it reads */
  if (o->ts_next + 8 > o->ts_read || o->ts_interp + 8 > o->ts_read ||
      o->ts_frame + 8 > o->ts_read || o->ts_native_tid + 8 > o->ts_read ||
      o->ts_top + 8 > o->ts_read || o->ts_top != o->ts_chunk + 8)
    abort();
  if (o->fr_back + 8 > o->fr_read || o->fr_code + 8 > o->fr_read || o->fr_lasti + 8 > o->fr_read ||
      o->fr_owner + 1 > o->fr_read || (o->fr_tlbc_index && o->fr_tlbc_index + 4 > o->fr_read))
    abort();
  if (o->co_name + 8 > o->co_read || o->co_filename + 8 > o->co_read ||
      o->co_linetable + 8 > o->co_read || o->co_firstlineno + 4 > o->co_read ||
      (o->ob_type && o->ob_type + 8u > o->co_read))
    abort();
  /* str and bytes headers: what codecache.c's fixed header read holds */
  if (o->str_ascii_hdr && (o->str_compact_hdr + 8u > 96 || o->str_state + 4u > o->str_ascii_hdr ||
                           o->str_length + 8u > o->str_compact_hdr))
    abort();
  if (o->str_kind_shift != 2 && o->str_kind_shift != 8) abort();
  if (o->free_threaded && o->gil_kind != PY_GIL_NONE) abort();
  if (!o->free_threaded && (o->gil_holder > 24 || o->gil_locked > 24)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t dbg[PY_DEBUG_OFFSETS_READ];
  memset(dbg, 0, sizeof(dbg));
  size_t len = size < sizeof(dbg) ? size : sizeof(dbg);
  memcpy(dbg, data, len);
  /* the parser alone, from each static table it may override */
  static const int minors[] = {13, 14, 15};
  for (size_t i = 0; i < sizeof(minors) / sizeof(minors[0]); i++) {
    struct py_offsets o;
    char why[160];
    if (python_offsets_for(3, minors[i], 0, &o) < 0) abort();
    if (python_offsets_from_debug(dbg, len, &o, why, sizeof(why)) == 0)
      check(&o);
    else if (!why[0])
      abort(); /* a refusal always says why */
  }
  /* as locate sees it: version string, pre-release rules, anchors */
  struct py_proc *p = calloc(1, sizeof(*p));
  if (!p) abort();
  char why[200];
  why[0] = '\0';
  int rc = python_setup_from_debug(p, 0x7f0000000000ull, dbg, len, why, sizeof(why));
  if (rc == 0) {
    check(&p->off);
    if (p->interp_head != 0x7f0000000000ull + p->off.rt_interp_head) abort();
  } else if (rc == -ENOTSUP && !why[0]) {
    abort();
  }
  free(p);
  return 0;
}
