/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Struct layouts of CPython 2.7 and 3.6-3.13 on x86_64 / aarch64 (LP64),
 * release builds with the GIL. The numbers were measured from the DWARF of
 * real builds of each version and agree with py-spy's and PyPerf's
 * tables. From 3.13 the interpreter publishes its own offsets
 * (_Py_DebugOffsets at the start of _PyRuntime, debug_offsets.c): those
 * win over the static table; 3.14 and later have no static table at all,
 * only the shape of their frames, every offset comes from the target.
 */
#include <errno.h>
#include <string.h>

#include "python.h"

static uint32_t max_u32(const uint32_t *v, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i] > m) m = v[i];
  return m;
}

/* Read sizes cover the highest field used, so one read per struct suffices. */
void python_offsets_finish(struct py_offsets *o) {
  uint32_t ts[] = {o->ts_next,       o->ts_interp, o->ts_frame, o->ts_cframe, o->ts_thread_id,
                   o->ts_native_tid, o->ts_chunk,  o->ts_top,   o->ts_curexc, o->ts_exc_info};
  o->ts_read = max_u32(ts, sizeof(ts) / sizeof(ts[0])) + 8;
  uint32_t fr[] = {o->fr_back, o->fr_code, o->fr_lasti, o->fr_owner, o->fr_tlbc_index};
  o->fr_read = max_u32(fr, sizeof(fr) / sizeof(fr[0])) + 8;
  uint32_t co[] = {o->ob_type ? o->ob_type : 8, o->co_filename, o->co_name, o->co_qualname,
                   o->co_firstlineno,           o->co_linetable};
  o->co_read = max_u32(co, sizeof(co) / sizeof(co[0])) + 8;
}

int python_offsets_for(int major, int minor, int micro, struct py_offsets *out) {
  struct py_offsets o;
  memset(&o, 0, sizeof(o));
  o.major = (uint8_t)major;
  o.minor = (uint8_t)minor;
  if (major == 2 && minor == 7) {
    o.walk = PY_WALK_FRAMEOBJ;
    o.lt_format = PY_LT_LNOTAB_U8;
    o.str_kind = PY_STR_BYTES27;
    o.gil_kind = PY_GIL_TSTATE_SYM;
    o.is_next = 0, o.is_tstate_head = 8, o.is_modules = 16;
    o.ts_next = 0, o.ts_interp = 8, o.ts_frame = 16, o.ts_thread_id = 144;
    o.fr_back = 24, o.fr_code = 32, o.fr_lasti = 120;
    o.co_filename = 80, o.co_name = 88, o.co_firstlineno = 96, o.co_linetable = 104;
    o.gc_kind = PY_GC_SYMBOL;
    o.ts_curexc = 72, o.ts_exc_info = 96, o.ts_exc_inline = true;
    python_offsets_finish(&o);
    *out = o;
    return 0;
  }
  /* 3.15 and later have the shape of 3.14; whether their _Py_DebugOffsets
   * can be read decides (debug_offsets.c) */
  if (major != 3 || minor < 6) return -ENOTSUP;

  o.str_kind = minor >= 12 ? PY_STR_UNICODE312 : PY_STR_UNICODE33;
  o.is_next = 0;
  o.ts_next = 8, o.ts_interp = 16;
  if (minor <= 10) {
    o.walk = PY_WALK_FRAMEOBJ;
    o.is_tstate_head = 8;
    o.is_modules = minor == 6 ? 16 : minor == 7 ? 40 : minor == 8 ? 56 : 856;
    o.ts_frame = 24;
    o.ts_thread_id = minor == 6 ? 152 : 176;
    o.fr_back = 24, o.fr_code = 32;
    o.fr_lasti = minor == 6 ? 120 : minor == 10 ? 96 : 104;
    o.lasti_is_index = minor == 10;
    if (minor <= 7) {
      o.co_firstlineno = 36, o.co_filename = 96, o.co_name = 104, o.co_linetable = 112;
    } else {
      o.co_firstlineno = 40, o.co_filename = 104, o.co_name = 112, o.co_linetable = 120;
    }
    o.lt_format = minor == 10 ? PY_LT_310 : PY_LT_LNOTAB_S8;
    /* the collector's flag: a static of gcmodule.c (3.6), in
     * _PyRuntime.gc (3.7, 3.8), in each interpreter's gc (3.9+) */
    o.gc_kind = minor == 6 ? PY_GC_SYMBOL : minor <= 8 ? PY_GC_RUNTIME : PY_GC_INTERP;
    o.gc_collecting = minor == 7 ? 632 : minor == 8 ? 544 : minor >= 9 ? 816 : 0;
    if (minor == 6) {
      o.ts_curexc = 80, o.ts_exc_info = 104, o.ts_exc_inline = true;
    } else {
      o.ts_curexc = 88, o.ts_exc_info = 144, o.exc_item_field = 0; /* exc_type */
    }
    if (minor == 6) {
      o.gil_kind = PY_GIL_TSTATE_SYM;
    } else {
      o.gil_kind = PY_GIL_RUNTIME;
      o.rt_interp_head = minor == 7 ? 24 : 32;
      /* 3.7.0-3.7.3 had a smaller _PyRuntimeState (py-spy's table) */
      o.rt_tstate_current = minor == 7 ? (micro <= 3 ? 1392 : 1480) : minor == 8 ? 1368 : 568;
    }
    python_offsets_finish(&o);
    *out = o;
    return 0;
  }

  /* 3.11+: _PyInterpreterFrame in per-thread data stack chunks */
  o.lt_format = PY_LT_311;
  o.co_filename = 112, o.co_name = 120, o.co_qualname = 128, o.co_linetable = 136;
  o.fr_lasti = 56; /* prev_instr (3.11/3.12) or instr_ptr (3.13) */
  o.gil_holder = 8, o.gil_locked = 16;
  o.owner_max = 4;
  o.gc_kind = PY_GC_INTERP;
  o.exc_item_field = 0; /* exc_value */
  if (minor <= 13) {    /* 3.14 publishes them in _asyncio's own debug section */
    o.fr_localsplus = 72;
    o.gen_iframe = minor == 11 ? 80 : 72;
    o.task_fut_waiter = minor == 13 ? 112 : 128;
    o.task_coro = o.task_fut_waiter + 8;
    o.task_name = o.task_fut_waiter + 16;
  }
  if (minor == 11) {
    o.gc_collecting = 848;
    o.ts_curexc = 96, o.ts_exc_info = 120;
    o.walk = PY_WALK_CFRAME;
    o.rt_interp_head = 40;
    o.is_tstate_head = 16, o.is_modules = 888;
    o.gil_kind = PY_GIL_RUNTIME;
    o.rt_tstate_current = 576;
    o.ts_cframe = 56, o.cf_current = 8;
    o.ts_thread_id = 152, o.ts_native_tid = 160, o.ts_chunk = 296, o.ts_top = 304;
    o.fr_code = 32, o.fr_back = 48, o.fr_owner = 69;
    o.co_firstlineno = 72, o.co_code_adaptive = 184;
  } else if (minor == 12) {
    o.walk = PY_WALK_CFRAME;
    o.rt_interp_head = 40;
    o.is_tstate_head = 72, o.is_gil_ptr = 384, o.is_modules = 944;
    o.gil_kind = PY_GIL_INTERP_PTR;
    o.gc_collecting = 312;
    o.ts_curexc = 96, o.ts_exc_info = 104;
    o.ts_cframe = 56, o.cf_current = 0;
    o.ts_thread_id = 136, o.ts_native_tid = 144, o.ts_chunk = 232, o.ts_top = 240;
    o.fr_code = 0, o.fr_back = 8, o.fr_owner = 70;
    o.co_firstlineno = 68, o.co_code_adaptive = 192;
    o.skip_owner3 = true;
  } else if (minor >= 14) {
    /* Only the shape is known here; python_offsets_from_debug() fills in
     * every offset, and locate refuses a 3.14 without readable offsets. */
    o.walk = PY_WALK_CURFRAME;
    o.gil_kind = PY_GIL_INTERP_PTR;
    o.skip_owner3 = true;
    /* f_executable is a _PyStackRef: the low bits are tags */
    o.code_tagged = true;
    /* owner 3 is FRAME_OWNED_BY_INTERPRETER; 4 (CSTACK) is never assigned */
    o.owner_max = 3;
    o.needs_debug_offsets = true;
  } else { /* 3.13.0, overridden by _Py_DebugOffsets when readable */
    o.walk = PY_WALK_CURFRAME;
    o.rt_interp_head = 632;
    o.is_next = 7264, o.is_tstate_head = 7344, o.is_gil_ptr = 16, o.is_modules = 7656;
    o.gc_collecting = 7600;
    o.ts_curexc = 112, o.ts_exc_info = 120;
    o.gil_kind = PY_GIL_INTERP_PTR;
    o.ts_frame = 72;
    o.ts_thread_id = 152, o.ts_native_tid = 160, o.ts_chunk = 232, o.ts_top = 240;
    o.fr_code = 0, o.fr_back = 8, o.fr_owner = 70;
    o.co_firstlineno = 68, o.co_code_adaptive = 200;
    o.skip_owner3 = true;
  }
  python_offsets_finish(&o);
  *out = o;
  return 0;
}
