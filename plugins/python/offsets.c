/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Struct layouts of CPython 2.7 and 3.6-3.14 on x86_64 / aarch64 (LP64),
 * release builds with the GIL. The numbers for 2.7-3.13 were measured from
 * the DWARF of real builds of each version and agree with py-spy's and
 * PyPerf's tables. From 3.13 the interpreter
 * publishes its own offsets (_Py_DebugOffsets at the start of _PyRuntime):
 * those win over the static table; 3.14 has no static table at all, every
 * offset comes from the target.
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
static void finish(struct py_offsets *o) {
  uint32_t ts[] = {o->ts_next,       o->ts_interp, o->ts_frame, o->ts_cframe, o->ts_thread_id,
                   o->ts_native_tid, o->ts_chunk,  o->ts_top,   o->ts_curexc, o->ts_exc_info};
  o->ts_read = max_u32(ts, sizeof(ts) / sizeof(ts[0])) + 8;
  uint32_t fr[] = {o->fr_back, o->fr_code, o->fr_lasti, o->fr_owner};
  o->fr_read = max_u32(fr, sizeof(fr) / sizeof(fr[0])) + 8;
  uint32_t co[] = {8 /* ob_type */, o->co_filename,    o->co_name,
                   o->co_qualname,  o->co_firstlineno, o->co_linetable};
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
    o.is_next = 0, o.is_tstate_head = 8;
    o.ts_next = 0, o.ts_interp = 8, o.ts_frame = 16, o.ts_thread_id = 144;
    o.fr_back = 24, o.fr_code = 32, o.fr_lasti = 120;
    o.co_filename = 80, o.co_name = 88, o.co_firstlineno = 96, o.co_linetable = 104;
    o.gc_kind = PY_GC_SYMBOL;
    o.ts_curexc = 72, o.ts_exc_info = 96, o.ts_exc_inline = true;
    finish(&o);
    *out = o;
    return 0;
  }
  if (major != 3 || minor < 6 || minor > 14) return -ENOTSUP;

  o.str_kind = minor >= 12 ? PY_STR_UNICODE312 : PY_STR_UNICODE33;
  o.is_next = 0;
  o.ts_next = 8, o.ts_interp = 16;
  if (minor <= 10) {
    o.walk = PY_WALK_FRAMEOBJ;
    o.is_tstate_head = 8;
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
    finish(&o);
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
    o.is_tstate_head = 16;
    o.gil_kind = PY_GIL_RUNTIME;
    o.rt_tstate_current = 576;
    o.ts_cframe = 56, o.cf_current = 8;
    o.ts_thread_id = 152, o.ts_native_tid = 160, o.ts_chunk = 296, o.ts_top = 304;
    o.fr_code = 32, o.fr_back = 48, o.fr_owner = 69;
    o.co_firstlineno = 72, o.co_code_adaptive = 184;
  } else if (minor == 12) {
    o.walk = PY_WALK_CFRAME;
    o.rt_interp_head = 40;
    o.is_tstate_head = 72, o.is_gil_ptr = 384;
    o.gil_kind = PY_GIL_INTERP_PTR;
    o.gc_collecting = 312;
    o.ts_curexc = 96, o.ts_exc_info = 104;
    o.ts_cframe = 56, o.cf_current = 0;
    o.ts_thread_id = 136, o.ts_native_tid = 144, o.ts_chunk = 232, o.ts_top = 240;
    o.fr_code = 0, o.fr_back = 8, o.fr_owner = 70;
    o.co_firstlineno = 68, o.co_code_adaptive = 192;
    o.skip_owner3 = true;
  } else if (minor == 14) {
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
    o.is_next = 7264, o.is_tstate_head = 7344, o.is_gil_ptr = 16;
    o.gc_collecting = 7600;
    o.ts_curexc = 112, o.ts_exc_info = 120;
    o.gil_kind = PY_GIL_INTERP_PTR;
    o.ts_frame = 72;
    o.ts_thread_id = 152, o.ts_native_tid = 160, o.ts_chunk = 232, o.ts_top = 240;
    o.fr_code = 0, o.fr_back = 8, o.fr_owner = 70;
    o.co_firstlineno = 68, o.co_code_adaptive = 200;
    o.skip_owner3 = true;
  }
  finish(&o);
  *out = o;
  return 0;
}

static uint64_t u64_at(const uint8_t *b, size_t pos) {
  uint64_t v;
  memcpy(&v, b + pos, sizeof(v));
  return v;
}

/* Where each field we use sits inside _Py_DebugOffsets (every member is a
 * uint64, no padding). The struct itself changes between minors: 3.14
 * inserted threads_main, code_object_generation, tlbc_generation,
 * stackpointer, tlbc_index and co_tlbc, so every later position moved. The
 * version word (offset 8) picks the layout. 3.13 positions are from the
 * DWARF of 3.13.0; 3.14 positions are computed from py-spy's 3.14.0
 * bindings, as no 3.14 build exists here. */
struct dbg_layout {
  uint8_t minor;
  uint16_t total; /* sizeof(_Py_DebugOffsets) */
  uint16_t rt_size, rt_interp_head;
  uint16_t is_size, is_next, is_threads_head, is_ceval_gil, is_gil_state, is_gil_locked,
      is_gil_holder, is_code_gen; /* is_code_gen 0: none (3.13) */
  uint16_t is_gc, gc_size, gc_collecting;
  uint16_t ts_size, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_tid, ts_chunk;
  uint16_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
  uint16_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_adaptive;
  uint16_t ob_size, ob_type;
  uint16_t bytes_ob_size, bytes_ob_sval;
  uint16_t uni_state, uni_length, uni_ascii_size;
  uint8_t frame_size; /* sizeof(_PyInterpreterFrame) this minor must report */
};

static const struct dbg_layout dbg_layouts[] = {
    {.minor = 13,
     .total = 584,
     .rt_size = 24,
     .rt_interp_head = 40,
     .is_size = 48,
     .is_next = 64,
     .is_threads_head = 72,
     .is_ceval_gil = 112,
     .is_gil_state = 120,
     .is_gil_locked = 136,
     .is_gil_holder = 144,
     .is_gc = 80,
     .gc_size = 568,
     .gc_collecting = 576,
     .ts_size = 152,
     .ts_next = 168,
     .ts_interp = 176,
     .ts_current_frame = 184,
     .ts_thread_id = 192,
     .ts_native_tid = 200,
     .ts_chunk = 208,
     .fr_size = 224,
     .fr_previous = 232,
     .fr_executable = 240,
     .fr_instr_ptr = 248,
     .fr_owner = 264,
     .co_size = 272,
     .co_filename = 280,
     .co_name = 288,
     .co_qualname = 296,
     .co_linetable = 304,
     .co_firstlineno = 312,
     .co_adaptive = 344,
     .ob_size = 352,
     .ob_type = 360,
     .bytes_ob_size = 520,
     .bytes_ob_sval = 528,
     .uni_state = 544,
     .uni_length = 552,
     .uni_ascii_size = 560,
     .frame_size = 80},
    {.minor = 14,
     .total = 760,
     .rt_size = 24,
     .rt_interp_head = 40,
     .is_size = 48,
     .is_next = 64,
     .is_threads_head = 72,
     .is_ceval_gil = 120,
     .is_gil_state = 128,
     .is_gil_locked = 144,
     .is_gil_holder = 152,
     .is_code_gen = 160,
     .is_gc = 88,
     .gc_size = 648,
     .gc_collecting = 656,
     .ts_size = 176,
     .ts_next = 192,
     .ts_interp = 200,
     .ts_current_frame = 208,
     .ts_thread_id = 216,
     .ts_native_tid = 224,
     .ts_chunk = 232,
     .fr_size = 248,
     .fr_previous = 256,
     .fr_executable = 264,
     .fr_instr_ptr = 272,
     .fr_owner = 288,
     .co_size = 312,
     .co_filename = 320,
     .co_name = 328,
     .co_qualname = 336,
     .co_linetable = 344,
     .co_firstlineno = 352,
     .co_adaptive = 384,
     .ob_size = 400,
     .ob_type = 408,
     .bytes_ob_size = 600,
     .bytes_ob_sval = 608,
     .uni_state = 624,
     .uni_length = 632,
     .uni_ascii_size = 640,
     .frame_size = 88},
};

#define STRUCT_SIZE_MAX (16u << 20) /* no CPython struct we read is larger */

/* A field of width w at offset off lies inside a struct of size size. */
static bool inside(uint64_t off, uint64_t w, uint64_t size) {
  return size <= STRUCT_SIZE_MAX && off <= size && w <= size - off;
}

int python_offsets_from_debug(const uint8_t *dbg, size_t len, struct py_offsets *out) {
  if (len < 24 || memcmp(dbg, "xdebugpy", 8) != 0) return -EINVAL;
  uint64_t version = u64_at(dbg, 8);
  if ((version >> 24) != 3) return -EINVAL;
  const struct dbg_layout *L = NULL;
  for (size_t i = 0; i < sizeof(dbg_layouts) / sizeof(dbg_layouts[0]); i++)
    if (dbg_layouts[i].minor == ((version >> 16) & 0xff)) L = &dbg_layouts[i];
  if (!L) return -EINVAL;
  if (u64_at(dbg, 16) != 0) return -ENOTSUP; /* free-threaded: other object headers */
  if (len < L->total) return -EINVAL;
#define F(field) u64_at(dbg, L->field)
  /* A layout read at the wrong positions gives sizes and offsets that do
   * not fit together; these are the facts every reader below relies on. */
  uint64_t rt = F(rt_size), is = F(is_size), ts = F(ts_size), fr = F(fr_size), co = F(co_size);
  if (fr != L->frame_size || F(ob_size) != 16 || F(ob_type) != 8) return -EINVAL;
  if (F(bytes_ob_size) != 16 || F(bytes_ob_sval) != 32) return -EINVAL;
  if (F(uni_state) != 32 || F(uni_length) != 16 || F(uni_ascii_size) != 40) return -EINVAL;
  if (!inside(F(rt_interp_head), 8, rt) || !inside(F(is_next), 8, is) ||
      !inside(F(is_threads_head), 8, is) || !inside(F(is_ceval_gil), 8, is) ||
      (L->is_code_gen && !inside(F(is_code_gen), 8, is)))
    return -EINVAL;
  if (!inside(F(ts_next), 8, ts) || !inside(F(ts_interp), 8, ts) ||
      !inside(F(ts_current_frame), 8, ts) || !inside(F(ts_thread_id), 8, ts) ||
      !inside(F(ts_native_tid), 8, ts) || !inside(F(ts_chunk), 16, ts))
    return -EINVAL;
  if (!inside(F(fr_previous), 8, fr) || !inside(F(fr_executable), 8, fr) ||
      !inside(F(fr_instr_ptr), 8, fr) || !inside(F(fr_owner), 1, fr))
    return -EINVAL;
  if (!inside(F(co_filename), 8, co) || !inside(F(co_name), 8, co) ||
      !inside(F(co_qualname), 8, co) || !inside(F(co_linetable), 8, co) ||
      !inside(F(co_firstlineno), 4, co) || !inside(F(co_adaptive), 0, co))
    return -EINVAL;
  uint64_t gil_state = F(is_gil_state), holder = F(is_gil_holder), locked = F(is_gil_locked);
  if (holder < gil_state || locked < gil_state || holder - gil_state > 256 ||
      locked - gil_state > 256)
    return -EINVAL;

  struct py_offsets o = *out;
  o.rt_interp_head = (uint32_t)F(rt_interp_head);
  o.is_next = (uint32_t)F(is_next);
  o.is_tstate_head = (uint32_t)F(is_threads_head);
  o.is_gil_ptr = (uint32_t)F(is_ceval_gil);
  o.is_code_gen = L->is_code_gen ? (uint32_t)F(is_code_gen) : 0;
  o.gil_holder = (uint32_t)(holder - gil_state);
  o.gil_locked = (uint32_t)(locked - gil_state);
  o.ts_next = (uint32_t)F(ts_next);
  o.ts_interp = (uint32_t)F(ts_interp);
  o.ts_frame = (uint32_t)F(ts_current_frame);
  o.ts_thread_id = (uint32_t)F(ts_thread_id);
  o.ts_native_tid = (uint32_t)F(ts_native_tid);
  o.ts_chunk = (uint32_t)F(ts_chunk);
  o.ts_top = o.ts_chunk + 8; /* datastack_top follows datastack_chunk */
  o.fr_back = (uint32_t)F(fr_previous);
  o.fr_code = (uint32_t)F(fr_executable);
  o.fr_lasti = (uint32_t)F(fr_instr_ptr);
  o.fr_owner = (uint32_t)F(fr_owner);
  o.co_filename = (uint32_t)F(co_filename);
  o.co_name = (uint32_t)F(co_name);
  o.co_qualname = (uint32_t)F(co_qualname);
  o.co_linetable = (uint32_t)F(co_linetable);
  o.co_firstlineno = (uint32_t)F(co_firstlineno);
  o.co_code_adaptive = (uint32_t)F(co_adaptive);
  /* the collector's flag: optional, a struct that does not fit only
   * loses the <GC> frames */
  uint64_t gc = F(is_gc), gcs = F(gc_size), gcc = F(gc_collecting);
  o.gc_kind = PY_GC_INTERP;
  o.gc_collecting = inside(gcc, 4, gcs) && inside(gc, gcs, is) ? (uint32_t)(gc + gcc) : 0;
#undef F
  finish(&o);
  /* the walker reads each struct into a fixed buffer */
  if (o.ts_read > PY_TSTATE_READ_MAX || o.fr_read > PY_FRAME_READ_MAX ||
      o.co_read > PY_CODE_READ_MAX)
    return -EINVAL;
  *out = o;
  return 0;
}
