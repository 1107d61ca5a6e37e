/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A synthetic CPython 3.13+ process image, built in this process's memory
 * and read back by the plugin through process_vm_readv on our own pid,
 * exactly as it reads a real target (tests/unit/test_python_synthetic.c).
 *
 * The image holds what the sampler walks: _PyRuntime beginning with a
 * complete _Py_DebugOffsets struct, the runtime's interpreter list, an
 * interpreter with its GIL and code-object generation, thread states with
 * a data-stack chunk, _PyInterpreterFrame chains (with interpreter-owned
 * entry frames and, on 3.14, tagged _PyStackRef executables), code
 * objects, str and bytes objects and 3.11+ location tables.
 *
 * Where each field of _Py_DebugOffsets sits is this file's own
 * transcription of CPython's own definition of the struct (3.13.0, the
 * 3.14 branch, and the main branch for 3.15), kept apart from the
 * plugin's so that a wrong position on either side shows; free-threaded
 * builds publish the same struct with other values (img_free_threaded). Included (not linked) by
 * the test, like the plugin sources.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Positions inside _Py_DebugOffsets, every member a uint64. 0 = the
 * field does not exist in that version. */
struct img_positions {
  int minor;
  size_t total;
  uint64_t free_threaded; /* values only: the flag the image publishes */
  size_t rt_size, rt_finalizing, rt_interp_head;
  size_t is_size, is_id, is_next, is_threads_head, is_threads_main, is_gc, is_modules, is_sysdict,
      is_builtins, is_ceval_gil, is_gil_state, is_gil_enabled, is_gil_locked, is_gil_holder,
      is_code_gen, is_tlbc_gen;
  size_t ts_size, ts_prev, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_tid,
      ts_chunk, ts_status;
  size_t ts_current_exception, ts_exc_state, err_exc_value; /* 3.15+ */
  size_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_localsplus, fr_owner,
      fr_stackpointer, fr_tlbc_index;
  size_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_argcount,
      co_localsplusnames, co_localspluskinds, co_adaptive, co_tlbc;
  size_t ob_size, ob_type;
  size_t bytes_size, bytes_ob_size, bytes_ob_sval;
  size_t uni_size, uni_state, uni_length, uni_ascii_size;
  size_t gc_size, gc_collecting; /* struct _gc_runtime_state */
  size_t gen_size, gen_iframe;   /* PyGenObject: where a coroutine's frame is */
};

static const struct img_positions IMG_POS_313 = {
    .minor = 13,
    .total = 584,
    .rt_size = 24,
    .rt_finalizing = 32,
    .rt_interp_head = 40,
    .is_size = 48,
    .is_id = 56,
    .is_next = 64,
    .is_threads_head = 72,
    .is_gc = 80,
    .is_modules = 88,
    .is_sysdict = 96,
    .is_builtins = 104,
    .is_ceval_gil = 112,
    .is_gil_state = 120,
    .is_gil_enabled = 128,
    .is_gil_locked = 136,
    .is_gil_holder = 144,
    .ts_size = 152,
    .ts_prev = 160,
    .ts_next = 168,
    .ts_interp = 176,
    .ts_current_frame = 184,
    .ts_thread_id = 192,
    .ts_native_tid = 200,
    .ts_chunk = 208,
    .ts_status = 216,
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
    .co_argcount = 320,
    .co_localsplusnames = 328,
    .co_localspluskinds = 336,
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
    .gc_collecting = 576,
};

static const struct img_positions IMG_POS_314 = {
    .minor = 14,
    .total = 760,
    .rt_size = 24,
    .rt_finalizing = 32,
    .rt_interp_head = 40,
    .is_size = 48,
    .is_id = 56,
    .is_next = 64,
    .is_threads_head = 72,
    .is_threads_main = 80,
    .is_gc = 88,
    .is_modules = 96,
    .is_sysdict = 104,
    .is_builtins = 112,
    .is_ceval_gil = 120,
    .is_gil_state = 128,
    .is_gil_enabled = 136,
    .is_gil_locked = 144,
    .is_gil_holder = 152,
    .is_code_gen = 160,
    .is_tlbc_gen = 168,
    .ts_size = 176,
    .ts_prev = 184,
    .ts_next = 192,
    .ts_interp = 200,
    .ts_current_frame = 208,
    .ts_thread_id = 216,
    .ts_native_tid = 224,
    .ts_chunk = 232,
    .ts_status = 240,
    .fr_size = 248,
    .fr_previous = 256,
    .fr_executable = 264,
    .fr_instr_ptr = 272,
    .fr_localsplus = 280,
    .fr_owner = 288,
    .fr_stackpointer = 296,
    .fr_tlbc_index = 304,
    .co_size = 312,
    .co_filename = 320,
    .co_name = 328,
    .co_qualname = 336,
    .co_linetable = 344,
    .co_firstlineno = 352,
    .co_argcount = 360,
    .co_localsplusnames = 368,
    .co_localspluskinds = 376,
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
    .gen_iframe = 680,
};

/* CPython main (3.15): the thread state gained base_frame,
 * last_profiled_frame(_seq) before thread_id and holds_gil, gil_requested,
 * current_exception, exc_state after status; err_stackitem follows it;
 * type_object grew two fields and heap_type_object, unicode_object's
 * compact size and gc's frame and stats were added. */
static const struct img_positions IMG_POS_315 = {
    .minor = 15,
    .total = 888,
    .rt_size = 24,
    .rt_finalizing = 32,
    .rt_interp_head = 40,
    .is_size = 48,
    .is_id = 56,
    .is_next = 64,
    .is_threads_head = 72,
    .is_threads_main = 80,
    .is_gc = 88,
    .is_modules = 96,
    .is_sysdict = 104,
    .is_builtins = 112,
    .is_ceval_gil = 120,
    .is_gil_state = 128,
    .is_gil_enabled = 136,
    .is_gil_locked = 144,
    .is_gil_holder = 152,
    .is_code_gen = 160,
    .is_tlbc_gen = 168,
    .ts_size = 176,
    .ts_prev = 184,
    .ts_next = 192,
    .ts_interp = 200,
    .ts_current_frame = 208,
    .ts_thread_id = 240,
    .ts_native_tid = 248,
    .ts_chunk = 256,
    .ts_status = 264,
    .ts_current_exception = 288,
    .ts_exc_state = 296,
    .err_exc_value = 304,
    .fr_size = 312,
    .fr_previous = 320,
    .fr_executable = 328,
    .fr_instr_ptr = 336,
    .fr_localsplus = 344,
    .fr_owner = 352,
    .fr_stackpointer = 360,
    .fr_tlbc_index = 368,
    .co_size = 376,
    .co_filename = 384,
    .co_name = 392,
    .co_qualname = 400,
    .co_linetable = 408,
    .co_firstlineno = 416,
    .co_argcount = 424,
    .co_localsplusnames = 432,
    .co_localspluskinds = 440,
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
};

/* The values the image's debug offsets publish (struct sizes and field
 * offsets of the synthetic interpreter), same shape as the positions. */
typedef struct img_positions img_values;

/* CPython 3.13.0's values. */
static const img_values IMG_VAL_3130 = {
    .rt_size = 283320,
    .rt_finalizing = 608,
    .rt_interp_head = 632,
    .is_size = 194968,
    .is_id = 7272,
    .is_next = 7264,
    .is_threads_head = 7344,
    .is_gc = 7400,
    .is_modules = 7656,
    .is_sysdict = 7640,
    .is_builtins = 7648,
    .is_ceval_gil = 16,
    .is_gil_state = 7752,
    .is_gil_enabled = 0,
    .is_gil_locked = 7768,
    .is_gil_holder = 7760,
    .ts_size = 304,
    .ts_prev = 0,
    .ts_next = 8,
    .ts_interp = 16,
    .ts_current_frame = 72,
    .ts_thread_id = 152,
    .ts_native_tid = 160,
    .ts_chunk = 232,
    .ts_status = 32,
    .fr_size = 80,
    .fr_previous = 8,
    .fr_executable = 0,
    .fr_instr_ptr = 56,
    .fr_localsplus = 72,
    .fr_owner = 70,
    .co_size = 208,
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_argcount = 52,
    .co_localsplusnames = 96,
    .co_localspluskinds = 104,
    .co_adaptive = 200,
    .ob_size = 16,
    .ob_type = 8,
    .bytes_size = 40,
    .bytes_ob_size = 16,
    .bytes_ob_sval = 32,
    .uni_size = 64,
    .uni_state = 32,
    .uni_length = 16,
    .uni_ascii_size = 40,
    .gc_size = 240,
    .gc_collecting = 200,
};

/* A 3.14 image: frame and code layouts of CPython 3.14.0 (as py-spy's
 * bindings give them); interpreter and runtime offsets are not known for
 * 3.14, so they are made up here, and deliberately moved away from
 * 3.13's so a parser that reads 3.13 values cannot pass. */
static const img_values IMG_VAL_314 = {
    .rt_size = 300000,
    .rt_finalizing = 776, /* past the 760 bytes of _Py_DebugOffsets */
    .rt_interp_head = 800,
    .is_size = 201000,
    .is_id = 7288,
    .is_next = 7280,
    .is_threads_head = 7360,
    .is_threads_main = 7368,
    .is_gc = 7424,
    .is_modules = 7680,
    .is_sysdict = 7664,
    .is_builtins = 7672,
    .is_ceval_gil = 16,
    .is_gil_state = 7776,
    .is_gil_enabled = 0,
    .is_gil_locked = 7792,
    .is_gil_holder = 7784,
    .is_code_gen = 7904,
    .is_tlbc_gen = 0,
    .ts_size = 312,
    .ts_prev = 0,
    .ts_next = 8,
    .ts_interp = 16,
    .ts_current_frame = 72,
    .ts_thread_id = 152,
    .ts_native_tid = 160,
    .ts_chunk = 232,
    .ts_status = 32,
    .fr_size = 88,
    .fr_previous = 8,
    .fr_executable = 0,
    .fr_instr_ptr = 56,
    .fr_localsplus = 80,
    .fr_owner = 74,
    .fr_stackpointer = 64,
    .fr_tlbc_index = 0,
    .co_size = 216,
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_argcount = 52,
    .co_localsplusnames = 96,
    .co_localspluskinds = 104,
    .co_adaptive = 208,
    .co_tlbc = 0,
    .ob_size = 16,
    .ob_type = 8,
    .bytes_size = 40,
    .bytes_ob_size = 16,
    .bytes_ob_sval = 32,
    .uni_size = 64,
    .uni_state = 32,
    .uni_length = 16,
    .uni_ascii_size = 40,
    .gc_size = 264,
    .gc_collecting = 224,
    .gen_size = 168, /* made up: a coroutine with its frame at 80 */
    .gen_iframe = 80,
};

/* A 3.15 image: made-up interpreter, thread and code offsets, moved away
 * from the 3.14 image's so that reading 3.15 at 3.14 positions shows. */
static const img_values IMG_VAL_315 = {
    .rt_size = 310000,
    .rt_finalizing = 904, /* past the 888 bytes of _Py_DebugOffsets */
    .rt_interp_head = 928,
    .is_size = 205000,
    .is_id = 7320,
    .is_next = 7312,
    .is_threads_head = 7392,
    .is_threads_main = 7400,
    .is_gc = 7456,
    .is_modules = 7712,
    .is_sysdict = 7696,
    .is_builtins = 7704,
    .is_ceval_gil = 24,
    .is_gil_state = 7808,
    .is_gil_enabled = 0,
    .is_gil_locked = 7824,
    .is_gil_holder = 7816,
    .is_code_gen = 7936,
    .is_tlbc_gen = 0,
    .ts_size = 360,
    .ts_prev = 0,
    .ts_next = 8,
    .ts_interp = 16,
    .ts_current_frame = 80,
    .ts_thread_id = 176,
    .ts_native_tid = 184,
    .ts_chunk = 264,
    .ts_status = 32,
    .ts_current_exception = 120,
    .ts_exc_state = 136,
    .err_exc_value = 0,
    .fr_size = 88,
    .fr_previous = 8,
    .fr_executable = 0,
    .fr_instr_ptr = 56,
    .fr_localsplus = 80,
    .fr_owner = 74,
    .fr_stackpointer = 64,
    .fr_tlbc_index = 0,
    .co_size = 232,
    .co_filename = 120,
    .co_name = 128,
    .co_qualname = 136,
    .co_linetable = 144,
    .co_firstlineno = 68,
    .co_argcount = 52,
    .co_localsplusnames = 104,
    .co_localspluskinds = 112,
    .co_adaptive = 224,
    .co_tlbc = 0,
    .ob_size = 16,
    .ob_type = 8,
    .bytes_size = 40,
    .bytes_ob_size = 16,
    .bytes_ob_sval = 32,
    .uni_size = 64,
    .uni_state = 32,
    .uni_length = 16,
    .uni_ascii_size = 40,
    .gc_size = 280,
    .gc_collecting = 232,
};

/* The free-threaded build of the same version: a 32-byte PyObject
 * (ob_tid, ob_flags, ob_mutex, ob_gc_bits, ob_ref_local, ob_ref_shared,
 * then ob_type at 24), so every object's fields move by 16; the code
 * object has co_tlbc (its threads' bytecode copies) before
 * co_code_adaptive, the frame a tlbc_index after stackpointer (owner
 * moves by 4), bytes keep ob_shash (ob_sval at 48), and a str's
 * header is 56 bytes (72 compact). */
static img_values img_free_threaded(const img_values *v) {
  img_values f = *v;
  f.free_threaded = 1;
  f.ob_size = 32, f.ob_type = 24;
  f.bytes_size = 56, f.bytes_ob_size = 32, f.bytes_ob_sval = 48;
  f.uni_size = v->uni_size + 16, f.uni_state = 48, f.uni_length = 32, f.uni_ascii_size = 56;
  f.co_filename += 16, f.co_name += 16, f.co_qualname += 16, f.co_linetable += 16;
  f.co_firstlineno += 16, f.co_argcount += 16, f.co_localsplusnames += 16;
  f.co_localspluskinds += 16;
  f.co_tlbc = v->co_adaptive + 16;
  f.co_adaptive = v->co_adaptive + 24;
  f.co_size = v->co_size + 24;
  f.fr_tlbc_index = v->fr_stackpointer + 8;
  f.fr_owner = v->fr_owner + 4;
  f.is_tlbc_gen = v->is_code_gen + 8;
  return f;
}

/* Fields the plugin reads, as (name, offset of the member in the struct):
 * used to copy values out of a real target's debug offsets and to write
 * them into an image, by position. */
/* One field list, kept as a block. */
// clang-format off
#define IMG_FIELDS(X)                                                                              \
  X(rt_size) X(rt_finalizing) X(rt_interp_head) X(is_size) X(is_id) X(is_next)                     \
  X(is_threads_head) X(is_threads_main) X(is_gc) X(is_modules) X(is_sysdict)                       \
  X(is_builtins) X(is_ceval_gil) X(is_gil_state) X(is_gil_enabled) X(is_gil_locked)                \
  X(is_gil_holder) X(is_code_gen) X(is_tlbc_gen) X(ts_size) X(ts_prev) X(ts_next)                  \
  X(ts_interp) X(ts_current_frame) X(ts_thread_id) X(ts_native_tid) X(ts_chunk)                    \
  X(ts_status) X(ts_current_exception) X(ts_exc_state) X(err_exc_value) X(fr_size) X(fr_previous) X(fr_executable) X(fr_instr_ptr)                          \
  X(fr_localsplus) X(fr_owner) X(fr_stackpointer) X(fr_tlbc_index) X(co_size)                      \
  X(co_filename) X(co_name) X(co_qualname) X(co_linetable) X(co_firstlineno)                       \
  X(co_argcount) X(co_localsplusnames) X(co_localspluskinds) X(co_adaptive) X(co_tlbc)             \
  X(ob_size) X(ob_type) X(bytes_size) X(bytes_ob_size) X(bytes_ob_sval) X(uni_size)                \
  X(uni_state) X(uni_length) X(uni_ascii_size) X(gc_size) X(gc_collecting) X(gen_size) X(gen_iframe)
// clang-format on

/* Values of a real debug-offsets blob read at the given positions. */
static img_values img_values_from_blob(const struct img_positions *pos, const uint8_t *blob) {
  img_values v;
  memset(&v, 0, sizeof(v));
#define READ_FIELD(f) \
  if (pos->f) memcpy(&v.f, blob + pos->f, 8);
  IMG_FIELDS(READ_FIELD)
#undef READ_FIELD
  return v;
}

/* ---- the image -------------------------------------------------------- */

struct img {
  const struct img_positions *pos;
  img_values val;
  uint8_t *arena;
  size_t used, cap;
  uint64_t runtime, interp, code_type, none;
};

static uint64_t img_addr(const void *p) {
  return (uint64_t)(uintptr_t)p;
}

/* Zeroed, 16-aligned bytes inside the arena. */
static uint8_t *img_alloc(struct img *m, size_t n) {
  m->used = (m->used + 15) & ~(size_t)15;
  if (m->used + n > m->cap) abort(); /* the test sized the arena wrong */
  uint8_t *p = m->arena + m->used;
  m->used += n;
  return p;
}

static void img_put64(uint8_t *base, uint64_t off, uint64_t v) {
  memcpy(base + off, &v, 8);
}

static void img_put32(uint8_t *base, uint64_t off, uint32_t v) {
  memcpy(base + off, &v, 4);
}

/* A compact str: ASCII (header 40) or, with non-ASCII Latin-1, compact
 * UCS1 (header 56); kind 2 for UCS2 data given as uint16 units. */
static uint64_t img_str(struct img *m, const void *data, size_t len, unsigned kind) {
  int ascii = kind == 1;
  for (size_t i = 0; ascii && i < len; i++)
    if (((const uint8_t *)data)[i] >= 0x80) ascii = 0;
  size_t hdr = ascii ? m->val.uni_ascii_size : m->val.uni_ascii_size + 16;
  uint8_t *o = img_alloc(m, hdr + (len + 1) * kind);
  img_put64(o, m->val.uni_length, len);
  /* free-threaded: `interned` is a byte of its own, the bit fields follow */
  unsigned shift = m->val.free_threaded ? 8 : 2;
  img_put32(o, m->val.uni_state,
            (kind << shift) | (1u << (shift + 3)) | ((unsigned)ascii << (shift + 4)) |
                (m->val.free_threaded ? 1u : 0u) /* interned */);
  memcpy(o + hdr, data, len * kind);
  return img_addr(o);
}

static uint64_t img_cstr(struct img *m, const char *s) {
  return img_str(m, s, strlen(s), 1);
}

static uint64_t img_bytes(struct img *m, const uint8_t *data, size_t len) {
  uint8_t *o = img_alloc(m, m->val.bytes_ob_sval + len + 1);
  img_put64(o, m->val.bytes_ob_size, len);
  memcpy(o + m->val.bytes_ob_sval, data, len);
  return img_addr(o);
}

/* A 3.11+ location table in which code units [8k, 8k+8) are on line
 * lines[k] (NO_COLUMNS entries: code 13, a signed varint line delta). */
static size_t img_linetable(uint8_t *out, size_t cap, int first, const int *lines, size_t n) {
  size_t len = 0;
  int line = first;
  for (size_t k = 0; k < n; k++) {
    int d = lines[k] - line;
    uint32_t v = d < 0 ? ((uint32_t)-d << 1) | 1 : (uint32_t)d << 1;
    if (len + 8 > cap) abort();
    out[len++] = (uint8_t)(0x80 | (13 << 3) | 7); /* 8 code units */
    do {
      uint8_t b = v & 63;
      v >>= 6;
      out[len++] = (uint8_t)(b | (v ? 64 : 0));
    } while (v);
    line = lines[k];
  }
  return len;
}

/* A code object whose code units [8k, 8k+8) are on lines[k]. */
static uint64_t img_code(struct img *m, uint64_t qualname, uint64_t name, uint64_t file, int first,
                         const int *lines, size_t n) {
  uint8_t *c = img_alloc(m, m->val.co_size + 16 * 8 + 64);
  img_put64(c, m->val.ob_type, m->code_type);
  img_put64(c, m->val.co_qualname, qualname);
  img_put64(c, m->val.co_name, name);
  img_put64(c, m->val.co_filename, file);
  img_put32(c, m->val.co_firstlineno, (uint32_t)first);
  uint8_t lt[128];
  size_t ltlen = img_linetable(lt, sizeof(lt), first, lines, n);
  img_put64(c, m->val.co_linetable, img_bytes(m, lt, ltlen));
  return img_addr(c);
}

/* Address of the instruction in code unit `unit` of code object code. */
static uint64_t img_instr(struct img *m, uint64_t code, unsigned unit) {
  return code + m->val.co_adaptive + 2u * unit;
}

/* Writes one _PyInterpreterFrame at f. */
static void img_frame(struct img *m, uint8_t *f, uint64_t executable, uint64_t previous,
                      uint64_t instr, uint8_t owner) {
  img_put64(f, m->val.fr_executable, executable);
  img_put64(f, m->val.fr_previous, previous);
  img_put64(f, m->val.fr_instr_ptr, instr);
  f[m->val.fr_owner] = owner;
}

/* The runtime (debug offsets first), an empty interpreter list and the
 * objects every image has. version: PY_VERSION_HEX. */
static void img_init(struct img *m, const struct img_positions *pos, const img_values *val,
                     uint64_t version, size_t arena_bytes) {
  memset(m, 0, sizeof(*m));
  m->pos = pos;
  m->val = *val;
  m->cap = arena_bytes;
  m->arena = aligned_alloc(4096, arena_bytes);
  if (!m->arena) abort();
  memset(m->arena, 0, arena_bytes);
  uint8_t *rt = img_alloc(m, val->rt_size);
  m->runtime = img_addr(rt);
  memcpy(rt, "xdebugpy", 8);
  img_put64(rt, 8, version);
  img_put64(rt, 16, val->free_threaded);
#define WRITE_FIELD(f) \
  if (pos->f) img_put64(rt, pos->f, val->f);
  IMG_FIELDS(WRITE_FIELD)
#undef WRITE_FIELD
  m->code_type = img_addr(img_alloc(m, 416)); /* stands for PyCode_Type */
  m->none = img_addr(img_alloc(m, 16));       /* stands for Py_None */
  m->interp = img_addr(img_alloc(m, val->is_size));
  img_put64(rt, val->rt_interp_head, m->interp);
  uint8_t *is = (uint8_t *)(uintptr_t)m->interp;
  /* ceval.gil points at the interpreter's own _gil */
  img_put64(is, val->is_ceval_gil, m->interp + val->is_gil_state);
}

static uint8_t *img_interp(struct img *m) {
  return (uint8_t *)(uintptr_t)m->interp;
}

#define IMG_TSTATE_IMPL_EXTRA 256

/* A thread state appended to the interpreter's list. */
static uint8_t *img_thread(struct img *m, uint32_t native_tid) {
  /* sizeof(PyThreadState), then room for _PyThreadStateImpl's own fields
   * (3.14+ asyncio's running task and task list) */
  uint8_t *ts = img_alloc(m, m->val.ts_size + IMG_TSTATE_IMPL_EXTRA);
  img_put64(ts, m->val.ts_interp, m->interp);
  img_put64(ts, m->val.ts_native_tid, native_tid);
  img_put64(ts, m->val.ts_thread_id, 0x7f0000001000ull + native_tid * 0x1000ull);
  uint8_t *is = img_interp(m);
  uint64_t head;
  memcpy(&head, is + m->val.is_threads_head, 8);
  if (!head) {
    img_put64(is, m->val.is_threads_head, img_addr(ts));
    return ts;
  }
  uint8_t *t = (uint8_t *)(uintptr_t)head;
  for (;;) {
    uint64_t next;
    memcpy(&next, t + m->val.ts_next, 8);
    if (!next) break;
    t = (uint8_t *)(uintptr_t)next;
  }
  img_put64(t, m->val.ts_next, img_addr(ts));
  img_put64(ts, m->val.ts_prev, img_addr(t));
  return ts;
}

/* A data-stack chunk of `bytes` for thread ts: {previous, size, top}, then
 * frames from offset 24. Returns where the first frame goes. */
static uint8_t *img_chunk(struct img *m, uint8_t *ts, size_t bytes) {
  uint8_t *c = img_alloc(m, bytes);
  img_put64(c, 8, bytes);
  img_put64(ts, m->val.ts_chunk, img_addr(c));
  img_put64(ts, m->val.ts_chunk + 8, img_addr(c) + 24); /* datastack_top */
  return c + 24;
}
