/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython 3.13+ publishes the offsets an out-of-process reader needs in
 * _Py_DebugOffsets, the first bytes of _PyRuntime: cookie "xdebugpy",
 * PY_VERSION_HEX, a free_threaded flag, then one group per struct (its
 * sizeof, then offsetof of its fields), every member a uint64. For 3.14
 * and later every offset the walker uses comes from there; nothing is
 * taken from a table of this plugin.
 *
 * The struct itself changes between minors (3.14 inserted threads_main,
 * code_object_generation, tlbc_generation, stackpointer, tlbc_index and
 * co_tlbc; 3.15 inserted base_frame, last_profiled_frame(_seq) and the
 * GIL/exception fields into the thread state, err_stackitem, type and heap
 * type fields, compactunicodeobject_size and the gc frame/stats fields),
 * so every later position moves. The version word picks the layout; the
 * positions below are transcribed from CPython's
 * Include/internal/pycore_debug_offsets.h of 3.13, of the 3.14 branch
 * (unchanged from 3.14.0 to 3.14.5) and of the main branch (3.15). A
 * minor newer than the newest layout is read with that layout when what
 * it then declares fits together (below), and refused otherwise.
 *
 * Nothing read is trusted: every struct size must be sane, every offset
 * used must lie inside the size its own struct declares, and the object
 * headers must be those of a default (16-byte PyObject) or free-threaded
 * (32-byte: ob_tid, ob_flags, ob_mutex, ob_gc_bits, ob_ref_local,
 * ob_ref_shared before ob_type) build, as the flag says. A struct read at
 * the wrong positions fails these, and the refusal names the field.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "python.h"

/* Where each member we read sits inside _Py_DebugOffsets; 0: the member
 * does not exist in that layout. */
struct dbg_layout {
  uint8_t minor;
  uint16_t total; /* sizeof(_Py_DebugOffsets) */
  uint16_t rt_size, rt_interp_head;
  uint16_t is_size, is_next, is_threads_head, is_gc, is_ceval_gil, is_gil_state, is_gil_locked,
      is_gil_holder, is_code_gen;
  uint16_t ts_size, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_tid, ts_chunk;
  uint16_t ts_current_exception, ts_exc_state, err_exc_value; /* 3.15+ */
  uint16_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_localsplus, fr_owner,
      fr_tlbc_index;
  uint16_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_adaptive,
      co_tlbc;
  uint16_t ob_size, ob_type;
  uint16_t bytes_size, bytes_ob_size, bytes_ob_sval;
  uint16_t uni_size, uni_state, uni_length, uni_ascii_size;
  uint16_t gc_size, gc_collecting;
  uint16_t gen_size, gen_iframe;
};

static const struct dbg_layout dbg_layouts[] = {
    {.minor = 13,
     .total = 584,
     .rt_size = 24,
     .rt_interp_head = 40,
     .is_size = 48,
     .is_next = 64,
     .is_threads_head = 72,
     .is_gc = 80,
     .is_ceval_gil = 112,
     .is_gil_state = 120,
     .is_gil_locked = 136,
     .is_gil_holder = 144,
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
     .fr_localsplus = 256,
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
     .bytes_size = 512,
     .bytes_ob_size = 520,
     .bytes_ob_sval = 528,
     .uni_size = 536,
     .uni_state = 544,
     .uni_length = 552,
     .uni_ascii_size = 560,
     .gc_size = 568,
     .gc_collecting = 576},
    {.minor = 14,
     .total = 760,
     .rt_size = 24,
     .rt_interp_head = 40,
     .is_size = 48,
     .is_next = 64,
     .is_threads_head = 72,
     .is_gc = 88,
     .is_ceval_gil = 120,
     .is_gil_state = 128,
     .is_gil_locked = 144,
     .is_gil_holder = 152,
     .is_code_gen = 160,
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
     .fr_localsplus = 280,
     .fr_owner = 288,
     .fr_tlbc_index = 304,
     .co_size = 312,
     .co_filename = 320,
     .co_name = 328,
     .co_qualname = 336,
     .co_linetable = 344,
     .co_firstlineno = 352,
     .co_adaptive = 384,
     .co_tlbc = 392,
     .ob_size = 400,
     .ob_type = 408,
     .bytes_size = 592,
     .bytes_ob_size = 600,
     .bytes_ob_sval = 608,
     .uni_size = 616,
     .uni_state = 624,
     .uni_length = 632,
     .uni_ascii_size = 640,
     .gc_size = 648,
     .gc_collecting = 656,
     .gen_size = 664,
     .gen_iframe = 680},
    {.minor = 15,
     .total = 888,
     .rt_size = 24,
     .rt_interp_head = 40,
     .is_size = 48,
     .is_next = 64,
     .is_threads_head = 72,
     .is_gc = 88,
     .is_ceval_gil = 120,
     .is_gil_state = 128,
     .is_gil_locked = 144,
     .is_gil_holder = 152,
     .is_code_gen = 160,
     .ts_size = 176,
     .ts_next = 192,
     .ts_interp = 200,
     .ts_current_frame = 208,
     .ts_thread_id = 240,
     .ts_native_tid = 248,
     .ts_chunk = 256,
     .ts_current_exception = 288,
     .ts_exc_state = 296,
     .err_exc_value = 304,
     .fr_size = 312,
     .fr_previous = 320,
     .fr_executable = 328,
     .fr_instr_ptr = 336,
     .fr_localsplus = 344,
     .fr_owner = 352,
     .fr_tlbc_index = 368,
     .co_size = 376,
     .co_filename = 384,
     .co_name = 392,
     .co_qualname = 400,
     .co_linetable = 408,
     .co_firstlineno = 416,
     .co_adaptive = 448,
     .co_tlbc = 456,
     .ob_size = 464,
     .ob_type = 472,
     .bytes_size = 688,
     .bytes_ob_size = 696,
     .bytes_ob_sval = 704,
     .uni_size = 712,
     .uni_state = 720,
     .uni_length = 728,
     .uni_ascii_size = 736,
     .gc_size = 752,
     .gc_collecting = 760,
     .gen_size = 792,
     .gen_iframe = 808},
};
#define NLAYOUTS (sizeof(dbg_layouts) / sizeof(dbg_layouts[0]))

#define STRUCT_SIZE_MAX (16u << 20) /* no CPython struct we read is larger */
/* A str header is 40 (56 free-threaded) bytes, a bytes one 32 (48): what
 * codecache.c reads of a string in one go must hold them */
#define STR_HEADER_MAX 64

struct parse {
  const uint8_t *dbg;
  char *why;
  size_t whylen;
  bool bad; /* why holds the first culprit */
};

static uint64_t u64_at(const uint8_t *b, size_t pos) {
  uint64_t v;
  memcpy(&v, b + pos, sizeof(v));
  return v;
}

__attribute__((format(printf, 2, 3))) static void fail(struct parse *ps, const char *fmt, ...) {
  if (ps->bad) return;
  ps->bad = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->why, ps->whylen, fmt, ap);
  va_end(ap);
}

/* The size a struct declares: nonzero and sane. */
static uint64_t size_of(struct parse *ps, uint16_t pos, const char *name) {
  uint64_t v = u64_at(ps->dbg, pos);
  if (v == 0 || v > STRUCT_SIZE_MAX) fail(ps, "%s.size %" PRIu64 " is not a struct size", name, v);
  return v;
}

/* A field of width w at the offset stored at pos, inside a struct of
 * `size` bytes; 0 when it is not (the parse then fails). */
static uint32_t field(struct parse *ps, uint16_t pos, uint64_t w, uint64_t size, const char *st,
                      const char *name) {
  uint64_t off = u64_at(ps->dbg, pos);
  if (size > STRUCT_SIZE_MAX || off >= size || w > size - off) {
    fail(ps, "%s.%s (%" PRIu64 ") beyond the struct's declared size %" PRIu64, st, name, off, size);
    return 0;
  }
  return (uint32_t)off;
}

static const struct dbg_layout *layout_for(unsigned minor) {
  if (minor < dbg_layouts[0].minor) return NULL;
  for (size_t i = 0; i < NLAYOUTS; i++)
    if (dbg_layouts[i].minor == minor) return &dbg_layouts[i];
  return &dbg_layouts[NLAYOUTS - 1]; /* newer: read as the newest known */
}

int python_offsets_from_debug(const uint8_t *dbg, size_t len, struct py_offsets *out, char *why,
                              size_t whylen) {
  char scratch[8];
  if (!why || whylen == 0) why = scratch, whylen = sizeof(scratch);
  why[0] = '\0';
  if (len < 24 || memcmp(dbg, "xdebugpy", 8) != 0) {
    snprintf(why, whylen, "no \"xdebugpy\" cookie");
    return -EINVAL;
  }
  uint64_t version = u64_at(dbg, 8);
  unsigned major = (unsigned)(version >> 24) & 0xff, minor = (unsigned)(version >> 16) & 0xff;
  const struct dbg_layout *L = major == 3 ? layout_for(minor) : NULL;
  if (!L || (version >> 32) != 0) {
    snprintf(why, whylen, "version word 0x%" PRIx64 " is not a CPython 3.13+ version", version);
    return -EINVAL;
  }
  if (len < L->total) {
    snprintf(why, whylen, "%zu bytes read, the 3.%u layout has %u", len, L->minor, L->total);
    return -EINVAL;
  }
  uint64_t ft = u64_at(dbg, 16);
  if (ft > 1) {
    snprintf(why, whylen, "free_threaded is %" PRIu64 ", not 0 or 1", ft);
    return -EINVAL;
  }
  if (ft && L->minor == 13) {
    /* 3.13t: whether its str state and frames are 3.14t's is not known
     * from a published layout here */
    snprintf(why, whylen, "free-threaded 3.13 is not read (its str and frame layouts are unknown)");
    return -EINVAL;
  }
  struct parse ps = {.dbg = dbg, .why = why, .whylen = whylen};
  struct py_offsets o = *out;
  uint64_t rt = size_of(&ps, L->rt_size, "runtime_state");
  uint64_t is = size_of(&ps, L->is_size, "interpreter_state");
  uint64_t ts = size_of(&ps, L->ts_size, "thread_state");
  uint64_t fr = size_of(&ps, L->fr_size, "interpreter_frame");
  uint64_t co = size_of(&ps, L->co_size, "code_object");
  uint64_t ob = size_of(&ps, L->ob_size, "pyobject");
  uint64_t by = size_of(&ps, L->bytes_size, "bytes_object");
  uint64_t un = size_of(&ps, L->uni_size, "unicode_object");
  if (ps.bad) return -EINVAL;

#define FIELD(dst, pos, w, size, st, name) o.dst = field(&ps, L->pos, w, size, st, name)
  FIELD(rt_interp_head, rt_interp_head, 8, rt, "runtime_state", "interpreters_head");
  FIELD(is_next, is_next, 8, is, "interpreter_state", "next");
  FIELD(is_tstate_head, is_threads_head, 8, is, "interpreter_state", "threads_head");
  FIELD(ts_next, ts_next, 8, ts, "thread_state", "next");
  FIELD(ts_interp, ts_interp, 8, ts, "thread_state", "interp");
  FIELD(ts_frame, ts_current_frame, 8, ts, "thread_state", "current_frame");
  FIELD(ts_thread_id, ts_thread_id, 8, ts, "thread_state", "thread_id");
  FIELD(ts_native_tid, ts_native_tid, 8, ts, "thread_state", "native_thread_id");
  /* datastack_top follows datastack_chunk */
  FIELD(ts_chunk, ts_chunk, 16, ts, "thread_state", "datastack_chunk");
  FIELD(fr_back, fr_previous, 8, fr, "interpreter_frame", "previous");
  FIELD(fr_code, fr_executable, 8, fr, "interpreter_frame", "executable");
  FIELD(fr_lasti, fr_instr_ptr, 8, fr, "interpreter_frame", "instr_ptr");
  FIELD(fr_owner, fr_owner, 1, fr, "interpreter_frame", "owner");
  uint32_t localsplus = field(&ps, L->fr_localsplus, 8, fr + 8, "interpreter_frame", "localsplus");
  FIELD(co_filename, co_filename, 8, co, "code_object", "filename");
  FIELD(co_name, co_name, 8, co, "code_object", "name");
  FIELD(co_qualname, co_qualname, 8, co, "code_object", "qualname");
  FIELD(co_linetable, co_linetable, 8, co, "code_object", "linetable");
  FIELD(co_firstlineno, co_firstlineno, 4, co, "code_object", "firstlineno");
  /* the bytecode is the variable part at the end: its start may be the size */
  FIELD(co_code_adaptive, co_adaptive, 0, co + 1, "code_object", "co_code_adaptive");
  FIELD(ob_type, ob_type, 8, ob, "pyobject", "ob_type");
  FIELD(bytes_ob_size, bytes_ob_size, 8, by, "bytes_object", "ob_size");
  FIELD(bytes_sval, bytes_ob_sval, 1, by, "bytes_object", "ob_sval");
  FIELD(str_state, uni_state, 4, un, "unicode_object", "state");
  FIELD(str_length, uni_length, 8, un, "unicode_object", "length");
  if (L->is_code_gen)
    FIELD(is_code_gen, is_code_gen, 8, is, "interpreter_state", "code_object_generation");
  else
    o.is_code_gen = 0;
  uint32_t ceval_gil = field(&ps, L->is_ceval_gil, 8, is, "interpreter_state", "ceval_gil");
  uint32_t gil_state = field(&ps, L->is_gil_state, 8, is, "interpreter_state", "_gil");
  uint32_t locked = field(&ps, L->is_gil_locked, 4, is, "interpreter_state", "_gil.locked");
  uint32_t holder = field(&ps, L->is_gil_holder, 8, is, "interpreter_state", "_gil.last_holder");
  if (ps.bad) return -EINVAL;

  /* The object headers say which build this is and that the struct was
   * read at the right positions. */
  uint64_t want_ob = ft ? 32 : 16, want_type = ft ? 24 : 8;
  if (ob != want_ob || o.ob_type != want_type) {
    snprintf(why, whylen,
             "pyobject.size %" PRIu64 " / ob_type %u, a %s build has %" PRIu64 " / %" PRIu64, ob,
             o.ob_type, ft ? "free-threaded" : "default", want_ob, want_type);
    return -EINVAL;
  }
  uint64_t ascii = u64_at(dbg, L->uni_ascii_size);
  if (o.bytes_ob_size != ob || o.str_length != ob || o.str_state != ob + 16 ||
      ascii < (uint64_t)o.str_state + 4 || ascii > un || ascii > STR_HEADER_MAX ||
      o.bytes_sval <= o.bytes_ob_size || o.bytes_sval > STR_HEADER_MAX) {
    snprintf(why, whylen,
             "bytes/str headers (ob_size %u, ob_sval %u, length %u, state %u, ascii size %" PRIu64
             ") do not follow a %" PRIu64 "-byte object header",
             o.bytes_ob_size, o.bytes_sval, o.str_length, o.str_state, ascii, ob);
    return -EINVAL;
  }
  o.str_ascii_hdr = (uint16_t)ascii;
  o.str_compact_hdr = (uint16_t)(ascii + 16); /* + utf8_length, utf8 */
  o.str_kind_shift = ft ? 8 : 2;              /* ft: `interned` is a byte of its own */
  if (holder < gil_state || locked < gil_state || holder - gil_state > 24 ||
      locked - gil_state > 24) {
    snprintf(why, whylen, "interpreter_state._gil fields (%u, %u) not inside _gil at %u", locked,
             holder, gil_state);
    return -EINVAL;
  }
  o.ts_top = o.ts_chunk + 8;
  o.free_threaded = ft == 1;
  if (o.free_threaded) {
    /* no GIL: which thread runs is the kernel's view (cpu mode) */
    o.gil_kind = PY_GIL_NONE;
    o.is_gil_ptr = o.gil_holder = o.gil_locked = 0;
    if (L->fr_tlbc_index && L->co_tlbc) {
      FIELD(fr_tlbc_index, fr_tlbc_index, 4, fr, "interpreter_frame", "tlbc_index");
      FIELD(co_tlbc, co_tlbc, 8, co, "code_object", "co_tlbc");
    }
  } else {
    o.is_gil_ptr = ceval_gil;
    o.gil_holder = holder - gil_state;
    o.gil_locked = locked - gil_state;
    o.fr_tlbc_index = o.co_tlbc = 0;
  }
  /* exception mode (3.15+): the exception being raised, and the one the
   * thread's own stack item holds (sys.exc_info() outside generators) */
  if (L->ts_current_exception) {
    uint32_t cur = field(&ps, L->ts_current_exception, 8, ts, "thread_state", "current_exception");
    uint32_t st = field(&ps, L->ts_exc_state, 8, ts, "thread_state", "exc_state");
    uint64_t ev = u64_at(dbg, L->err_exc_value);
    if (!ps.bad && (ev > 64 || st + ev + 8 > ts)) {
      snprintf(why, whylen, "err_stackitem.exc_value (%" PRIu64 ") beyond thread_state.size", ev);
      return -EINVAL;
    }
    o.ts_curexc = cur;
    o.ts_exc_info = st + (uint32_t)ev;
    o.ts_exc_inline = true;
  }
  if (ps.bad) return -EINVAL;
  /* asyncio reads frames' locals and a coroutine's frame inside its
   * generator only where it knows the Task layout too: 3.13 from this
   * plugin's table, 3.14+ from _AsyncioDebug (asyncio_debug.c) */
  if (o.task_fut_waiter) o.fr_localsplus = localsplus;
  if (o.task_fut_waiter || o.needs_debug_offsets) {
    uint64_t gen = L->gen_size ? u64_at(dbg, L->gen_size) : 0;
    uint64_t gi = L->gen_iframe ? u64_at(dbg, L->gen_iframe) : 0;
    if (gen && gen <= STRUCT_SIZE_MAX && gi >= 16 && gi < gen) o.gen_iframe = (uint32_t)gi;
  }
  /* the collector's flag: optional, a struct that does not fit only
   * loses the <GC> frames */
  uint64_t gc = u64_at(dbg, L->is_gc), gcs = u64_at(dbg, L->gc_size);
  uint64_t gcc = u64_at(dbg, L->gc_collecting);
  o.gc_kind = PY_GC_INTERP;
  o.gc_collecting = gcs <= STRUCT_SIZE_MAX && gcc + 4 <= gcs && gc < is && gcs <= is - gc
                        ? (uint32_t)(gc + gcc)
                        : 0;
#undef FIELD
  python_offsets_finish(&o);
  /* the walker reads each struct into a fixed buffer */
  if (o.ts_read > PY_TSTATE_READ_MAX || o.fr_read > PY_FRAME_READ_MAX ||
      o.co_read > PY_CODE_READ_MAX) {
    snprintf(why, whylen, "thread/frame/code fields beyond %u/%u/%u bytes", PY_TSTATE_READ_MAX,
             PY_FRAME_READ_MAX, PY_CODE_READ_MAX);
    return -EINVAL;
  }
  *out = o;
  return 0;
}

#define TLBC_INDEX_MAX 4096 /* more bytecode copies than threads we walk: garbage */

uint64_t python_tlbc_start(const struct py_proc *p, uint64_t code, const uint8_t *fb,
                           uint64_t adaptive) {
  int32_t idx;
  memcpy(&idx, fb + p->off.fr_tlbc_index, 4);
  /* entries[0] is co_code_adaptive itself: the common case costs no read */
  if (idx <= 0 || idx >= TLBC_INDEX_MAX || !p->off.co_tlbc) return adaptive;
  uint64_t arr = 0;
  if (pp_remote_read((pid_t)p->pid, code + p->off.co_tlbc, &arr, 8) < 0 || arr < 4096 ||
      arr >= (1ull << 47) || (arr & 7))
    return adaptive;
  /* _PyCodeArray: Py_ssize_t size, then char *entries[size] */
  uint64_t size = 0, entry = 0;
  struct pp_remote_iov iov[2] = {{arr, &size, 8},
                                 {arr + 8 + 8 * (uint64_t)(uint32_t)idx, &entry, 8}};
  if (pp_remote_readv((pid_t)p->pid, iov, 2) < 0 || (uint64_t)(uint32_t)idx >= size || !entry)
    return adaptive;
  return entry;
}
