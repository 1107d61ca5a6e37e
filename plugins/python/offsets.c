/*
 * Struct layouts of CPython 2.7 and 3.6-3.13 on x86_64 / aarch64 (LP64),
 * release builds with the GIL. The numbers were measured from the DWARF of
 * real builds (see /work/shared/reference/cpython-remote.md §3) and agree
 * with py-spy's and PyPerf's tables. From 3.13 the interpreter publishes its
 * own offsets (_Py_DebugOffsets at the start of _PyRuntime): those win over
 * the static table, which stays as the fallback and as a sanity check.
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
  uint32_t ts[] = {o->ts_next,      o->ts_interp,     o->ts_frame, o->ts_cframe,
                   o->ts_thread_id, o->ts_native_tid, o->ts_chunk, o->ts_top};
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
    finish(&o);
    *out = o;
    return 0;
  }
  if (major != 3 || minor < 6 || minor > 13) return -ENOTSUP;

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
  if (minor == 11) {
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
    o.ts_cframe = 56, o.cf_current = 0;
    o.ts_thread_id = 136, o.ts_native_tid = 144, o.ts_chunk = 232, o.ts_top = 240;
    o.fr_code = 0, o.fr_back = 8, o.fr_owner = 70;
    o.co_firstlineno = 68, o.co_code_adaptive = 192;
    o.skip_owner3 = true;
  } else { /* 3.13.0, overridden by _Py_DebugOffsets when readable */
    o.walk = PY_WALK_CURFRAME;
    o.rt_interp_head = 632;
    o.is_next = 7264, o.is_tstate_head = 7344, o.is_gil_ptr = 16;
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

/* Positions of the fields inside the 3.13 _Py_DebugOffsets struct (every
 * member is a uint64). 3.14 inserted fields, so this layout is 3.13 only;
 * the version word at offset 8 says which one we have. */
enum {
  D13_VERSION = 8,
  D13_FREE_THREADED = 16,
  D13_RT_INTERP_HEAD = 40,
  D13_IS_NEXT = 64,
  D13_IS_THREADS_HEAD = 72,
  D13_IS_CEVAL_GIL = 112,
  D13_IS_GIL_STATE = 120,
  D13_IS_GIL_LOCKED = 136,
  D13_IS_GIL_HOLDER = 144,
  D13_TS_NEXT = 168,
  D13_TS_INTERP = 176,
  D13_TS_CURRENT_FRAME = 184,
  D13_TS_THREAD_ID = 192,
  D13_TS_NATIVE_TID = 200,
  D13_TS_CHUNK = 208,
  D13_FR_SIZE = 224,
  D13_FR_PREVIOUS = 232,
  D13_FR_EXECUTABLE = 240,
  D13_FR_INSTR_PTR = 248,
  D13_FR_OWNER = 264,
  D13_CO_FILENAME = 280,
  D13_CO_NAME = 288,
  D13_CO_QUALNAME = 296,
  D13_CO_LINETABLE = 304,
  D13_CO_FIRSTLINENO = 312,
  D13_CO_ADAPTIVE = 344,
  D13_UNICODE_ASCII_SIZE = 560,
};

int python_offsets_from_debug(const uint8_t *dbg, size_t len, struct py_offsets *out) {
  if (len < PY_DEBUG_OFFSETS_READ || memcmp(dbg, "xdebugpy", 8) != 0) return -EINVAL;
  uint64_t version = u64_at(dbg, D13_VERSION);
  if ((version >> 24) != 3 || ((version >> 16) & 0xff) != 13) return -EINVAL;
  if (u64_at(dbg, D13_FREE_THREADED) != 0) return -ENOTSUP;
  /* Every offset must be plausible: inside a struct of a sane size. */
  static const int fields[] = {
      D13_RT_INTERP_HEAD, D13_IS_NEXT,          D13_IS_THREADS_HEAD, D13_IS_CEVAL_GIL,
      D13_IS_GIL_STATE,   D13_IS_GIL_LOCKED,    D13_IS_GIL_HOLDER,   D13_TS_NEXT,
      D13_TS_INTERP,      D13_TS_CURRENT_FRAME, D13_TS_THREAD_ID,    D13_TS_NATIVE_TID,
      D13_TS_CHUNK,       D13_FR_PREVIOUS,      D13_FR_EXECUTABLE,   D13_FR_INSTR_PTR,
      D13_FR_OWNER,       D13_CO_FILENAME,      D13_CO_NAME,         D13_CO_QUALNAME,
      D13_CO_LINETABLE,   D13_CO_FIRSTLINENO,   D13_CO_ADAPTIVE};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
    if (u64_at(dbg, (size_t)fields[i]) > (1u << 20)) return -EINVAL;
  if (u64_at(dbg, D13_FR_SIZE) != 80 || u64_at(dbg, D13_UNICODE_ASCII_SIZE) != 40) return -EINVAL;
  uint64_t gil_state = u64_at(dbg, D13_IS_GIL_STATE);
  uint64_t holder = u64_at(dbg, D13_IS_GIL_HOLDER), locked = u64_at(dbg, D13_IS_GIL_LOCKED);
  if (holder < gil_state || locked < gil_state || holder - gil_state > 256 ||
      locked - gil_state > 256)
    return -EINVAL;

  struct py_offsets o = *out;
  o.rt_interp_head = (uint32_t)u64_at(dbg, D13_RT_INTERP_HEAD);
  o.is_next = (uint32_t)u64_at(dbg, D13_IS_NEXT);
  o.is_tstate_head = (uint32_t)u64_at(dbg, D13_IS_THREADS_HEAD);
  o.is_gil_ptr = (uint32_t)u64_at(dbg, D13_IS_CEVAL_GIL);
  o.gil_holder = (uint32_t)(holder - gil_state);
  o.gil_locked = (uint32_t)(locked - gil_state);
  o.ts_next = (uint32_t)u64_at(dbg, D13_TS_NEXT);
  o.ts_interp = (uint32_t)u64_at(dbg, D13_TS_INTERP);
  o.ts_frame = (uint32_t)u64_at(dbg, D13_TS_CURRENT_FRAME);
  o.ts_thread_id = (uint32_t)u64_at(dbg, D13_TS_THREAD_ID);
  o.ts_native_tid = (uint32_t)u64_at(dbg, D13_TS_NATIVE_TID);
  o.ts_chunk = (uint32_t)u64_at(dbg, D13_TS_CHUNK);
  o.ts_top = o.ts_chunk + 8; /* datastack_top follows datastack_chunk */
  o.fr_back = (uint32_t)u64_at(dbg, D13_FR_PREVIOUS);
  o.fr_code = (uint32_t)u64_at(dbg, D13_FR_EXECUTABLE);
  o.fr_lasti = (uint32_t)u64_at(dbg, D13_FR_INSTR_PTR);
  o.fr_owner = (uint32_t)u64_at(dbg, D13_FR_OWNER);
  o.co_filename = (uint32_t)u64_at(dbg, D13_CO_FILENAME);
  o.co_name = (uint32_t)u64_at(dbg, D13_CO_NAME);
  o.co_qualname = (uint32_t)u64_at(dbg, D13_CO_QUALNAME);
  o.co_linetable = (uint32_t)u64_at(dbg, D13_CO_LINETABLE);
  o.co_firstlineno = (uint32_t)u64_at(dbg, D13_CO_FIRSTLINENO);
  o.co_code_adaptive = (uint32_t)u64_at(dbg, D13_CO_ADAPTIVE);
  finish(&o);
  *out = o;
  return 0;
}
