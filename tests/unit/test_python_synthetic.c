/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython 3.13 and 3.14 process images, walked by the plugin's own code.
 *
 * No 3.14 build exists on this machine, so 3.14 support is proven on a
 * synthetic image (tests/unit/python_image.c) built in this process and
 * read back with process_vm_readv on our own pid: the same calls the plugin
 * makes on a real target, from python_setup_from_debug() (version, layout
 * and offsets out of _Py_DebugOffsets) through python_validate() to
 * python_sample() (interpreter, threads, data-stack chunk, frames, code
 * cache, strings, line tables). The 3.14 facts in the image (debug-offset
 * positions, 88-byte frames with owner at 74, tagged _PyStackRef
 * executables, FRAME_OWNED_BY_INTERPRETER = 3, code_object_generation) are
 * CPython 3.14.0's as py-spy's 3.14.0 bindings give them, not measured.
 *
 * The approach itself is checked on 3.13, which does exist here: a real
 * python3.13 is started, located and sampled; its real _Py_DebugOffsets
 * must hold CPython 3.13.0's values at the positions the image
 * builder uses, and a synthetic 3.13 image built from those real values
 * and the real stack's names and lines must walk to exactly the stack the
 * real process gave.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../plugins/python/asyncio.c"
#include "../../plugins/python/asyncio_awaiter.c"
#include "../../plugins/python/asyncio_debug.c"
#include "../../plugins/python/asyncio_objects.c"
#include "../../plugins/python/asyncio_waiting.c"
#include "../../plugins/python/codecache.c"
#include "../../plugins/python/debug_offsets.c"
#include "../../plugins/python/linetable.c"
#include "../../plugins/python/locate.c"
#include "../../plugins/python/object_reader.c"
#include "../../plugins/python/offsets.c"
#include "../../plugins/python/opcodes.c"
#include "../../plugins/python/walk.c"
#include "python_image.c"
#include "testlib.h"

#define MAX_FRAMES 48

struct triple_out {
  char name[64], file[512];
  int line;
};

struct collected {
  uint32_t stacks;
  uint32_t tids[4];
  uint32_t n; /* frames of the last stack delivered */
  struct triple_out f[MAX_FRAMES];
};

static void collect(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t n,
                    bool truncated) {
  (void)truncated;
  struct collected *c = ctx;
  if (c->stacks < 4) c->tids[c->stacks] = tid;
  c->stacks++;
  c->n = n < MAX_FRAMES ? n : MAX_FRAMES;
  for (uint32_t i = 0; i < c->n; i++) {
    const struct py_code *code = frames[i].code; /* NULL: a pseudo frame */
    snprintf(c->f[i].name, sizeof(c->f[i].name), "%s", code ? code->name : frames[i].pseudo);
    snprintf(c->f[i].file, sizeof(c->f[i].file), "%s", code ? code->file : "");
    c->f[i].line = frames[i].line;
  }
}

/* One sample of p into c, <GC> frames on or off; python_sample's rc. */
static int sample_gc(struct py_proc *p, struct py_codecache *cc, enum py_thread_filter filter,
                     bool gc, struct collected *c, struct py_sample_result *res) {
  struct py_walker *w = python_walker_new(64);
  python_walker_set_gc(w, gc);
  memset(c, 0, sizeof(*c));
  int rc = python_sample(w, p, cc, filter, NULL, collect, c, res);
  python_walker_free(w);
  return rc;
}

/* One sample of p into c; returns python_sample's rc. */
static int sample(struct py_proc *p, struct py_codecache *cc, enum py_thread_filter filter,
                  struct collected *c, struct py_sample_result *res) {
  struct py_walker *w = python_walker_new(64);
  memset(c, 0, sizeof(*c));
  int rc = python_sample(w, p, cc, filter, NULL, collect, c, res);
  python_walker_free(w);
  return rc;
}

/* The proc as locate would leave it for an image: debug offsets copied
 * from the image's _PyRuntime with a real remote read. */
static int attach_image(struct img *m, struct py_proc *p, char *why, size_t whylen) {
  memset(p, 0, sizeof(*p));
  p->pid = p->ns_pid = (uint32_t)getpid();
  p->pthread_tid_off = -1;
  uint8_t dbg[PY_DEBUG_OFFSETS_READ];
  int rc = pp_remote_read((pid_t)p->pid, m->runtime, dbg, sizeof(dbg));
  if (rc < 0) return rc;
  rc = python_setup_from_debug(p, m->runtime, dbg, sizeof(dbg), why, whylen);
  if (rc < 0) return rc;
  p->pycode_type = m->code_type; /* locate takes these from ELF symbols */
  p->none_addr = m->none;
  return python_validate(p);
}

/* PP_PY_DEBUG_SEEDS=DIR: each image's _Py_DebugOffsets is written to
 * DIR/LABEL.bin, the python_debug_offsets fuzzer's seeds. */
static void dump_seed(const char *label, uint64_t runtime, size_t len) {
  const char *dir = getenv("PP_PY_DEBUG_SEEDS");
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s.bin", dir, label);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite((const void *)(uintptr_t)runtime, 1, len, f);
  fclose(f);
}

/* Frames of one synthetic stack, leaf first. */
struct want {
  const char *name, *file;
  int first, line;
};

/* Builds the stack of `want` (leaf first) in thread ts: every frame in the
 * thread's data-stack chunk (copied in one read) except the leaf's caller,
 * which lives outside it like a generator's frame (read on its own); an
 * interpreter-owned entry frame under the
 * outermost frame and one in the middle (a C call re-entering Python).
 * tag: low bits set on every other executable (3.14 _PyStackRef). */
static uint64_t build_stack(struct img *m, uint8_t *ts, const struct want *want, size_t n,
                            uint64_t tag, uint64_t *codes) {
  uint8_t *slot = img_chunk(m, ts, 16384);
  size_t step = m->val.fr_size + 32; /* frame + its localsplus */
  uint64_t none_ref = m->none | tag;
  /* outermost first: entry frame, then the frames root to leaf */
  uint8_t *entry = slot;
  img_frame(m, entry, none_ref, 0, 0, 3);
  uint64_t prev = img_addr(entry);
  slot += step;
  for (size_t k = n; k-- > 0;) {
    const struct want *w = &want[k];
    int lines[2] = {w->first, w->line};
    uint64_t code = img_code(m, img_cstr(m, w->name), img_cstr(m, w->name), img_cstr(m, w->file),
                             w->first, lines, 2);
    codes[k] = code;
    uint8_t *f = k == 1 ? img_alloc(m, step) : slot;
    uint64_t exec_ref = code | ((k & 1) ? tag : 0);
    /* code unit 8..15 is on w->line (unit 0..7 on the first line) */
    img_frame(m, f, exec_ref, prev, img_instr(m, code, 8 + (unsigned)k % 8), 0);
    prev = img_addr(f);
    if (k != 1) slot += step;
    if (k == n / 2) { /* an entry frame between two Python frames */
      img_frame(m, slot, none_ref, prev, 0, 3);
      prev = img_addr(slot);
      slot += step;
    }
  }
  img_put64(ts, m->val.ts_chunk + 8, img_addr(slot)); /* datastack_top */
  img_put64(ts, m->val.ts_current_frame, prev);
  return prev;
}

static void check_stack(const struct collected *c, const struct want *want, size_t n) {
  CHECK_EQ_INT(c->n, n);
  for (size_t i = 0; i < n && i < c->n; i++) {
    CHECK_EQ_STR(c->f[i].name, want[i].name);
    CHECK_EQ_STR(c->f[i].file, want[i].file);
    CHECK_EQ_INT(c->f[i].line, want[i].line);
  }
}

/* ---- 3.14 ------------------------------------------------------------- */

static const struct want STACK_314[] = {
    {"Klass.m\xc3\xa9thode", "app.py", 40, 44}, /* non-ASCII qualname (UCS1) */
    {"inner", "app.py", 30, 33},
    {"middle", "lib/util.py", 10, 12},
    {"outer", "lib/util.py", 1, 2},
    {"<module>", "app.py", 1, 50},
};
#define N314 (sizeof(STACK_314) / sizeof(STACK_314[0]))

static void image_314(void) {
  struct img m;
  img_init(&m, &IMG_POS_314, &IMG_VAL_314, 0x030E00F0, 4u << 20);
  uint8_t *main_ts = img_thread(&m, 4242);
  uint8_t *idle_ts = img_thread(&m, 4243); /* no Python frame: empty stack */
  (void)idle_ts;
  uint64_t codes[N314];
  /* Klass.méthode is given as UTF-8 above; the target holds Latin-1 */
  build_stack(&m, main_ts, STACK_314, N314, 1, codes);
  static const uint8_t latin1[] = "Klass.m\xe9thode";
  uint64_t q = img_str(&m, latin1, sizeof(latin1) - 1, 1);
  img_put64((uint8_t *)(uintptr_t)codes[0], m.val.co_qualname, q);

  struct py_proc p;
  char why[160] = "";
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);
  CHECK_EQ_STR(p.version, "3.14.0");
  CHECK_EQ_INT(p.off.fr_read >= 75, 1); /* owner at 74 is read */
  CHECK_EQ_INT(p.off.fr_owner, 74);
  CHECK_EQ_INT(p.off.is_tstate_head, 7360);
  CHECK_EQ_INT(p.off.co_code_adaptive, 208);
  CHECK_EQ_INT(p.off.is_code_gen, 7904);
  CHECK(p.off.code_tagged);

  struct py_codecache *cc = python_codecache_new(64);
  struct collected c;
  struct py_sample_result res;
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_INT(res.threads, 2);
  CHECK_EQ_INT(res.failed, 0);
  CHECK_EQ_INT(c.stacks, 1); /* the idle thread has no frame */
  CHECK_EQ_INT(c.tids[0], 4242);
  check_stack(&c, STACK_314, N314);

  /* tag bits 3 (the 3.15 width) are cleared as well */
  build_stack(&m, main_ts, STACK_314, N314, 3, codes);
  img_put64((uint8_t *)(uintptr_t)codes[0], m.val.co_qualname, q);
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  check_stack(&c, STACK_314, N314);

  /* gil mode: only the holder, when the GIL is locked */
  uint8_t *is = img_interp(&m);
  img_put64(is, m.val.is_gil_holder, img_addr(main_ts));
  img_put32(is, m.val.is_gil_locked, 1);
  CHECK_EQ_INT(sample(&p, cc, PY_GIL_THREAD, &c, &res), 0);
  CHECK_EQ_INT(c.stacks, 1);
  CHECK_EQ_INT(c.tids[0], 4242);
  img_put64(is, m.val.is_gil_holder, img_addr(idle_ts));
  CHECK_EQ_INT(sample(&p, cc, PY_GIL_THREAD, &c, &res), 0);
  CHECK_EQ_INT(c.stacks, 0);

  /* <GC>: the collector's flag found through interpreter_state.gc and
   * gc.collecting; the leaf of the GIL holder only, and only when asked */
  CHECK_EQ_INT(p.off.gc_kind, PY_GC_INTERP);
  CHECK_EQ_INT(p.off.gc_collecting, 7424 + 224);
  img_put32(is, m.val.is_gc + m.val.gc_collecting, 1);
  img_put64(is, m.val.is_gil_holder, img_addr(main_ts));
  CHECK_EQ_INT(sample_gc(&p, cc, PY_ALL_THREADS, true, &c, &res), 0);
  CHECK_EQ_INT(c.stacks, 1);
  CHECK_EQ_INT(c.n, N314 + 1);
  CHECK_EQ_STR(c.f[0].name, "<GC>");
  CHECK_EQ_STR(c.f[1].name, "Klass.m\xc3\xa9thode"); /* the leaf, under <GC> */
  CHECK_EQ_INT(sample_gc(&p, cc, PY_ALL_THREADS, false, &c, &res), 0);
  CHECK_EQ_INT(c.n, N314);                               /* not asked: no <GC> */
  img_put64(is, m.val.is_gil_holder, img_addr(idle_ts)); /* another thread collects */
  CHECK_EQ_INT(sample_gc(&p, cc, PY_ALL_THREADS, true, &c, &res), 0);
  CHECK_EQ_INT(c.n, N314);
  img_put64(is, m.val.is_gil_holder, img_addr(main_ts));
  img_put32(is, m.val.is_gc + m.val.gc_collecting, 0); /* not collecting */
  CHECK_EQ_INT(sample_gc(&p, cc, PY_ALL_THREADS, true, &c, &res), 0);
  CHECK_EQ_INT(c.n, N314);
  img_put64(is, m.val.is_gil_holder, img_addr(idle_ts)); /* as before */

  /* A code object freed and another allocated at its address: without a
   * new session the cache only notices through code_object_generation. */
  uint64_t inner = codes[1];
  img_put64((uint8_t *)(uintptr_t)inner, m.val.co_qualname, img_cstr(&m, "replaced"));
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_STR(c.f[1].name, "inner"); /* generation unchanged: cached entry */
  uint64_t gen;
  memcpy(&gen, is + m.val.is_code_gen, 8);
  img_put64(is, m.val.is_code_gen, gen + 1);
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_STR(c.f[1].name, "replaced");

  /* owner 4 (CSTACK) is never assigned in 3.14: a frame saying so is
   * torn or garbage, and the sample fails rather than skip it */
  uint64_t leaf;
  memcpy(&leaf, main_ts + m.val.ts_current_frame, 8);
  ((uint8_t *)(uintptr_t)leaf)[m.val.fr_owner] = 4;
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_INT(res.failed, 1);
  CHECK_EQ_INT(c.stacks, 0);
  ((uint8_t *)(uintptr_t)leaf)[m.val.fr_owner] = 0;

  python_codecache_free(cc);
  free(m.arena);
}

/* ---- 3.14t, 3.15, 3.15t and later: the same walk, other layouts ------- */

/* Thread-local bytecode (free-threaded 3.14+): the leaf frame runs its
 * thread's copy of the code, co_tlbc->entries[1], at the same unit as in
 * co_code_adaptive; its line must come from the copy. */
static void use_tlbc_copy(struct img *m, uint8_t *ts, uint64_t leaf_code) {
  uint8_t *copy = img_alloc(m, 16 * 8 * 2);
  uint8_t *arr = img_alloc(m, 24); /* _PyCodeArray {size, entries[2]} */
  img_put64(arr, 0, 2);
  img_put64(arr, 8, leaf_code + m->val.co_adaptive);
  img_put64(arr, 16, img_addr(copy));
  img_put64((uint8_t *)(uintptr_t)leaf_code, m->val.co_tlbc, img_addr(arr));
  uint64_t leaf;
  memcpy(&leaf, ts + m->val.ts_current_frame, 8);
  uint8_t *f = (uint8_t *)(uintptr_t)leaf;
  uint64_t ip;
  memcpy(&ip, f + m->val.fr_instr_ptr, 8);
  img_put64(f, m->val.fr_instr_ptr, img_addr(copy) + (ip - leaf_code - m->val.co_adaptive));
  img_put32(f, m->val.fr_tlbc_index, 1);
}

/* The same image read from another process: a forked child holds a copy
 * of it at the same addresses, and p is pointed at the child's pid, so
 * every read crosses processes as it does on a real target. */
static void from_child(struct py_proc *p, struct img *m, uint32_t tid) {
  int ready[2];
  if (pipe(ready) < 0) return;
  pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    (void)!write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char b;
  CHECK(child > 0 && read(ready[0], &b, 1) == 1);
  close(ready[0]);
  if (child <= 0) return;
  /* scribble on our own copy: the names must come from the child's */
  uint64_t runtime_cookie;
  memcpy(&runtime_cookie, (void *)(uintptr_t)m->runtime, 8);
  memset((void *)(uintptr_t)m->runtime, 0, 8);
  struct py_proc q;
  char why[160] = "";
  uint8_t dbg[PY_DEBUG_OFFSETS_READ];
  memset(&q, 0, sizeof(q));
  q.pid = q.ns_pid = (uint32_t)child;
  q.pthread_tid_off = -1;
  CHECK_EQ_INT(pp_remote_read(child, m->runtime, dbg, sizeof(dbg)), 0);
  CHECK_EQ_INT(python_setup_from_debug(&q, m->runtime, dbg, sizeof(dbg), why, sizeof(why)), 0);
  q.pycode_type = p->pycode_type;
  CHECK_EQ_INT(python_validate(&q), 0);
  struct py_codecache *cc = python_codecache_new(64);
  struct collected c;
  struct py_sample_result res;
  CHECK_EQ_INT(sample(&q, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_INT(c.stacks, 1);
  CHECK_EQ_INT(c.tids[0], tid);
  check_stack(&c, STACK_314, N314);
  python_codecache_free(cc);
  memcpy((void *)(uintptr_t)m->runtime, &runtime_cookie, 8);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
}

/* One image of a given layout, values and version: located, its stack
 * read back exactly (names, files, lines, tid), in every mode. */
static void image_variant(const char *label, const struct img_positions *pos, const img_values *val,
                          uint64_t version, const char *want_version, uint64_t tag) {
  printf("image %s\n", label);
  struct img m;
  img_init(&m, pos, val, version, 4u << 20);
  uint8_t *main_ts = img_thread(&m, 5150);
  uint8_t *idle_ts = img_thread(&m, 5151);
  uint64_t codes[N314];
  build_stack(&m, main_ts, STACK_314, N314, tag, codes);
  static const uint8_t latin1[] = "Klass.m\xe9thode";
  img_put64((uint8_t *)(uintptr_t)codes[0], m.val.co_qualname,
            img_str(&m, latin1, sizeof(latin1) - 1, 1));
  struct py_proc p;
  char why[160] = "";
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);
  if (why[0]) printf("  refused: %s\n", why);
  CHECK_EQ_STR(p.version, want_version);
  CHECK_EQ_INT(p.off.free_threaded, val->free_threaded == 1);
  CHECK_EQ_INT(p.off.ts_native_tid, val->ts_native_tid);
  CHECK_EQ_INT(p.off.co_code_adaptive, val->co_adaptive);
  CHECK_EQ_INT(p.off.ob_type, val->ob_type);
  CHECK(p.off.code_tagged);

  struct py_codecache *cc = python_codecache_new(64);
  struct collected c;
  struct py_sample_result res;
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_INT(res.threads, 2);
  CHECK_EQ_INT(res.failed, 0);
  CHECK_EQ_INT(c.stacks, 1);
  CHECK_EQ_INT(c.tids[0], 5150);
  check_stack(&c, STACK_314, N314);
  from_child(&p, &m, 5150);

  uint8_t *is = img_interp(&m);
  img_put64(is, m.val.is_gil_holder, img_addr(main_ts));
  img_put32(is, m.val.is_gil_locked, 1);
  img_put32(is, m.val.is_gc + m.val.gc_collecting, 1);
  if (val->free_threaded) {
    /* no GIL: gil mode has no thread to show, and nobody is known to
     * run the collector (no <GC>); cpu mode is the kernel's view */
    CHECK_EQ_INT(p.off.gil_kind, PY_GIL_NONE);
    CHECK_EQ_INT(sample(&p, cc, PY_GIL_THREAD, &c, &res), 0);
    CHECK_EQ_INT(res.err, 0);
    CHECK_EQ_INT(c.stacks, 0);
    CHECK_EQ_INT(sample_gc(&p, cc, PY_ALL_THREADS, true, &c, &res), 0);
    CHECK_EQ_INT(c.n, N314);
    /* the leaf runs a thread-local copy of its bytecode */
    CHECK_EQ_INT(p.off.fr_tlbc_index, val->fr_tlbc_index);
    CHECK_EQ_INT(p.off.co_tlbc, val->co_tlbc);
    use_tlbc_copy(&m, main_ts, codes[0]);
    CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
    check_stack(&c, STACK_314, N314);
  } else {
    CHECK_EQ_INT(sample(&p, cc, PY_GIL_THREAD, &c, &res), 0);
    CHECK_EQ_INT(c.stacks, 1);
    CHECK_EQ_INT(c.tids[0], 5150);
    img_put64(is, m.val.is_gil_holder, img_addr(idle_ts));
    CHECK_EQ_INT(sample(&p, cc, PY_GIL_THREAD, &c, &res), 0);
    CHECK_EQ_INT(c.stacks, 0);
    img_put64(is, m.val.is_gil_holder, img_addr(main_ts));
    CHECK_EQ_INT(sample_gc(&p, cc, PY_ALL_THREADS, true, &c, &res), 0);
    CHECK_EQ_INT(c.n, N314 + 1);
    CHECK_EQ_STR(c.f[0].name, "<GC>");
  }
  if (pos->ts_current_exception) {
    /* exception mode (3.15+): raising, or handling in a plain frame */
    uint64_t exc = img_addr(img_alloc(&m, 64));
    CHECK_EQ_INT(sample(&p, cc, PY_EXCEPTION_THREADS, &c, &res), 0);
    CHECK_EQ_INT(c.stacks, 0);
    img_put64(main_ts, m.val.ts_current_exception, exc);
    CHECK_EQ_INT(sample(&p, cc, PY_EXCEPTION_THREADS, &c, &res), 0);
    CHECK_EQ_INT(c.stacks, 1);
    CHECK_EQ_INT(c.tids[0], 5150);
    img_put64(main_ts, m.val.ts_current_exception, 0);
    img_put64(main_ts, m.val.ts_exc_state + m.val.err_exc_value, exc);
    CHECK_EQ_INT(sample(&p, cc, PY_EXCEPTION_THREADS, &c, &res), 0);
    CHECK_EQ_INT(c.stacks, 1);
    check_stack(&c, STACK_314, N314);
    img_put64(main_ts, m.val.ts_exc_state + m.val.err_exc_value, m.none);
    CHECK_EQ_INT(sample(&p, cc, PY_EXCEPTION_THREADS, &c, &res), 0);
    CHECK_EQ_INT(c.stacks, 0); /* None: not handling one */
  }
  dump_seed(label, m.runtime, pos->total);
  python_codecache_free(cc);
  free(m.arena);
}

static void images_other_layouts(void) {
  img_values v314t = img_free_threaded(&IMG_VAL_314);
  img_values v315t = img_free_threaded(&IMG_VAL_315);
  image_variant("3.14", &IMG_POS_314, &IMG_VAL_314, 0x030E00F0, "3.14.0", 1);
  image_variant("3.14t", &IMG_POS_314, &v314t, 0x030E02F0, "3.14.2", 1);
  image_variant("3.15", &IMG_POS_315, &IMG_VAL_315, 0x030F00A2, "3.15.0a2", 3);
  image_variant("3.15t", &IMG_POS_315, &v315t, 0x030F00A2, "3.15.0a2", 1);
  /* a version newer than any layout known, whose struct fits the newest */
  image_variant("3.16", &IMG_POS_315, &IMG_VAL_315, 0x031000A1, "3.16.0a1", 3);
}

/* The prefetch reads, in one system call, what the last sample found at
 * the addresses it found it (walk.c). A stack that grew in place past the
 * part of the chunk that was prefetched must be read again, not cut at the
 * old top; one that shrank is served from the prefetched copy. */
static void prefetch_grown_stack(void) {
  struct img m;
  img_init(&m, &IMG_POS_314, &IMG_VAL_314, 0x030E00F0, 4u << 20);
  uint8_t *ts = img_thread(&m, 4242);
  uint64_t codes[N314];
  build_stack(&m, ts, STACK_314, N314, 1, codes);
  static const uint8_t latin1[] = "Klass.m\xe9thode"; /* as image_314() */
  img_put64((uint8_t *)(uintptr_t)codes[0], m.val.co_qualname,
            img_str(&m, latin1, sizeof(latin1) - 1, 1));
  struct py_proc p;
  char why[160] = "";
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);
  struct py_codecache *cc = python_codecache_new(64);
  struct collected c;
  struct py_sample_result res;
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  check_stack(&c, STACK_314, N314);
  CHECK_EQ_INT(p.spec.ts == img_addr(ts), 1);
  uint64_t lo, top, leaf;
  memcpy(&lo, ts + m.val.ts_chunk, 8);
  memcpy(&top, ts + m.val.ts_chunk + 8, 8);
  memcpy(&leaf, ts + m.val.ts_current_frame, 8);
  CHECK_EQ_INT(p.spec.chunk_lo == lo && p.spec.chunk_len == top - lo + PY_CHUNK_SLACK, 1);
  CHECK_EQ_INT(p.spec.nframes, 1); /* the frame built outside the chunk */

  /* frames pushed at the top, further than the prefetched slack */
  size_t step = m.val.fr_size + 32;
  enum { MORE = 24 };
  CHECK_EQ_INT(MORE * step > PY_CHUNK_SLACK, 1);
  int lines[2] = {60, 61};
  uint64_t code = img_code(&m, img_cstr(&m, "pushed"), img_cstr(&m, "pushed"),
                           img_cstr(&m, "deep.py"), 60, lines, 2);
  uint64_t old_top = top, old_leaf = leaf;
  for (int i = 0; i < MORE; i++) {
    img_frame(&m, (uint8_t *)(uintptr_t)top, code, leaf, img_instr(&m, code, 8), 0);
    leaf = top;
    top += step;
  }
  img_put64(ts, m.val.ts_chunk + 8, top);
  img_put64(ts, m.val.ts_current_frame, leaf);
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_INT(res.failed, 0);
  CHECK_EQ_INT(c.n, MORE + N314);
  for (int i = 0; i < MORE && i < (int)c.n; i++) {
    CHECK_EQ_STR(c.f[i].name, "pushed");
    CHECK_EQ_INT(c.f[i].line, 61);
  }
  for (size_t i = 0; i < N314 && MORE + i < c.n; i++)
    CHECK_EQ_STR(c.f[MORE + i].name, STACK_314[i].name);
  CHECK_EQ_INT(p.spec.chunk_len == top - lo + PY_CHUNK_SLACK, 1);

  /* and popped again: the longer prefetched copy holds it */
  img_put64(ts, m.val.ts_chunk + 8, old_top);
  img_put64(ts, m.val.ts_current_frame, old_leaf);
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  check_stack(&c, STACK_314, N314);

  /* a torn leaf read through the prefetch fails the sample and drops the
   * guesses; the next sample reads everything afresh */
  ((uint8_t *)(uintptr_t)old_leaf)[m.val.fr_owner] = 9;
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  CHECK_EQ_INT(res.failed, 1);
  CHECK_EQ_INT(p.spec.chunk_lo, 0);
  ((uint8_t *)(uintptr_t)old_leaf)[m.val.fr_owner] = 0;
  CHECK_EQ_INT(sample(&p, cc, PY_ALL_THREADS, &c, &res), 0);
  check_stack(&c, STACK_314, N314);
  CHECK_EQ_INT(p.spec.chunk_lo, lo);

  python_codecache_free(cc);
  free(m.arena);
}

/* Structs that must be refused, each with its reason naming the culprit. */
static void refusals_314(void) {
  struct img m;
  struct py_proc p;
  char why[160];
  img_init(&m, &IMG_POS_314, &IMG_VAL_314, 0x030E00F0, 1u << 20);
  img_thread(&m, 1);
  uint8_t *rt = (uint8_t *)(uintptr_t)m.runtime;

  img_put64(rt, 16, 1); /* free-threaded flag, default build's object headers */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "pyobject.size 16 / ob_type 8, a free-threaded build has 32 / 24");
  img_put64(rt, 16, 0);

  img_put64(rt, 8, 0x030E00A5); /* 3.14.0a5 */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "pre-release");
  img_put64(rt, 8, 0x030F00F0); /* 3.15 read at 3.15's positions: no fit */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "3.15");
  img_put64(rt, 8, 0x030E01C1); /* 3.14.1rc1 is accepted */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);
  CHECK_EQ_STR(p.version, "3.14.1rc1");
  img_put64(rt, 8, 0x030E00F0);

  img_put64(rt, IMG_POS_314.fr_size, 72); /* a frame too small for its owner */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "_Py_DebugOffsets: interpreter_frame.owner (74) beyond");
  img_put64(rt, IMG_POS_314.fr_size, 88);
  img_put64(rt, IMG_POS_314.ts_native_tid, 400); /* beyond thread_state.size */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "thread_state.native_thread_id (400) beyond the struct's declared size 312");
  img_put64(rt, IMG_POS_314.ts_native_tid, 160);
  img_put64(rt, IMG_POS_314.uni_state, 36); /* str state not after length and hash */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "bytes/str headers");
  img_put64(rt, IMG_POS_314.uni_state, 32);
  img_put64(rt, IMG_POS_314.co_size, 1ull << 40); /* absurd struct size */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "code_object.size");
  img_put64(rt, IMG_POS_314.co_size, 216);
  img_put64(rt, 16, 2); /* free_threaded neither 0 nor 1 */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "free_threaded is 2");
  img_put64(rt, 16, 0);
  img_put64(rt, 8, 0x031000A1); /* 3.16, whose struct is not the newest known layout */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  CHECK_CONTAINS(why, "unsupported Python 3.16 (_Py_DebugOffsets: ");
  img_put64(rt, 8, 0x030E00F0);
  rt[0] = 'X'; /* no cookie: not 3.13+ at all */
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -EINVAL);
  rt[0] = 'x';
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);

  /* a 3.13-shaped struct claiming to be 3.14 */
  struct img m13;
  img_init(&m13, &IMG_POS_313, &IMG_VAL_3130, 0x030E00F0, 1u << 20);
  img_thread(&m13, 1);
  CHECK_EQ_INT(attach_image(&m13, &p, why, sizeof(why)), -ENOTSUP);
  free(m13.arena);
  free(m.arena);
}

/* ---- 3.13: the approach checked against a real interpreter ------------ */

static const char *find_python313(void) {
  static const char *const paths[] = {"/root/.pyenv/versions/3.13.0/bin/python3.13",
                                      "/usr/bin/python3.13", "/usr/local/bin/python3.13"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
    if (access(paths[i], X_OK) == 0) return paths[i];
  return NULL;
}

/* Starts workload.py nested (idle leaf: a stable stack) and waits for its
 * "ready" line. */
static pid_t start_workload(const char *exe) {
  const char *src = getenv("PP_SOURCE_DIR");
  char script[4096];
  snprintf(script, sizeof(script), "%s/tests/workloads/python/workload.py", src ? src : ".");
  int fds[2];
  if (pipe(fds) < 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(exe, exe, script, "nested", "60", "idle", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[16];
  ssize_t n = read(fds[0], buf, sizeof(buf));
  close(fds[0]);
  if (pid < 0 || n < 5 || memcmp(buf, "ready", 5) != 0) return -1;
  usleep(300000); /* into its stable idle stack */
  return pid;
}

static void real_vs_image_313(void) {
  const char *exe = find_python313();
  if (!exe) {
    printf("SKIPPED part: no python3.13 on this machine to check the image against\n");
    return;
  }
  pid_t pid = start_workload(exe);
  CHECK(pid > 0);
  if (pid <= 0) return;
  struct py_proc real;
  char why[160] = "";
  int rc = -1;
  for (int i = 0; i < 20 && rc != 0; i++) {
    rc = python_locate((uint32_t)pid, &real, why, sizeof(why));
    if (rc != 0) usleep(100000);
  }
  CHECK_EQ_INT(rc, 0);
  uint8_t blob[PY_DEBUG_OFFSETS_READ];
  if (rc == 0) rc = pp_remote_read(pid, real.runtime, blob, sizeof(blob));
  CHECK_EQ_INT(rc, 0);
  struct collected want_c;
  struct py_sample_result res;
  struct py_codecache *cc = python_codecache_new(64);
  if (rc == 0) {
    /* the real process, through the real path */
    CHECK_EQ_INT(sample(&real, cc, PY_ALL_THREADS, &want_c, &res), 0);
    CHECK_EQ_INT(res.failed, 0);
    CHECK_EQ_INT(want_c.stacks, 1);
    CHECK(want_c.n >= 6);
    CHECK_EQ_STR(want_c.f[0].name, "spin");
    CHECK_EQ_STR(want_c.f[want_c.n - 1].name, "<module>");
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  if (rc != 0 || want_c.n < 6) {
    python_codecache_free(cc);
    return;
  }

  dump_seed("3.13.0-real", (uint64_t)(uintptr_t)blob, IMG_POS_313.total);
  /* The real debug offsets at the builder's 3.13 positions hold the
   * CPython 3.13.0's values: positions and values are right for 3.13. */
  img_values real_vals = img_values_from_blob(&IMG_POS_313, blob);
  CHECK_EQ_INT(memcmp(blob, "xdebugpy", 8), 0);
#define SAME_AS_REF(f) CHECK_EQ_INT(real_vals.f, IMG_VAL_3130.f)
  SAME_AS_REF(rt_interp_head);
  SAME_AS_REF(is_next);
  SAME_AS_REF(is_threads_head);
  SAME_AS_REF(is_ceval_gil);
  SAME_AS_REF(is_gil_state);
  SAME_AS_REF(is_gil_locked);
  SAME_AS_REF(is_gil_holder);
  SAME_AS_REF(is_gc);
  SAME_AS_REF(gc_size);
  SAME_AS_REF(gc_collecting);
  SAME_AS_REF(ts_size);
  SAME_AS_REF(ts_next);
  SAME_AS_REF(ts_interp);
  SAME_AS_REF(ts_current_frame);
  SAME_AS_REF(ts_thread_id);
  SAME_AS_REF(ts_native_tid);
  SAME_AS_REF(ts_chunk);
  SAME_AS_REF(fr_size);
  SAME_AS_REF(fr_previous);
  SAME_AS_REF(fr_executable);
  SAME_AS_REF(fr_instr_ptr);
  SAME_AS_REF(fr_owner);
  SAME_AS_REF(co_size);
  SAME_AS_REF(co_filename);
  SAME_AS_REF(co_name);
  SAME_AS_REF(co_qualname);
  SAME_AS_REF(co_linetable);
  SAME_AS_REF(co_firstlineno);
  SAME_AS_REF(co_adaptive);
  SAME_AS_REF(ob_size);
  SAME_AS_REF(ob_type);
  SAME_AS_REF(bytes_ob_size);
  SAME_AS_REF(bytes_ob_sval);
  SAME_AS_REF(uni_state);
  SAME_AS_REF(uni_length);
  SAME_AS_REF(uni_ascii_size);
#undef SAME_AS_REF
  /* the plugin parsed the same offsets out of the real process */
  CHECK_EQ_INT(real.off.is_tstate_head, real_vals.is_threads_head);
  CHECK_EQ_INT(real.off.ts_frame, real_vals.ts_current_frame);
  CHECK_EQ_INT(real.off.fr_owner, real_vals.fr_owner);
  CHECK_EQ_INT(real.off.co_code_adaptive, real_vals.co_adaptive);
  CHECK(!real.off.code_tagged);
  CHECK_EQ_INT(real.off.is_code_gen, 0);

  /* A synthetic 3.13 image with the real values and the real stack's
   * names and lines walks to exactly what the real process gave. */
  struct want want[MAX_FRAMES];
  for (uint32_t i = 0; i < want_c.n; i++)
    want[i] = (struct want){want_c.f[i].name, want_c.f[i].file, 1, want_c.f[i].line};
  struct img m;
  img_init(&m, &IMG_POS_313, &real_vals, 0x030D00F0, 2u << 20);
  uint8_t *rt = (uint8_t *)(uintptr_t)m.runtime;
  uint8_t *ts = img_thread(&m, (uint32_t)pid);
  uint64_t codes[MAX_FRAMES];
  build_stack(&m, ts, want, want_c.n, 0, codes);
  struct py_proc p;
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);
  CHECK_EQ_STR(p.version, "3.13.0");
  struct collected got;
  struct py_codecache *cc2 = python_codecache_new(64);
  CHECK_EQ_INT(sample(&p, cc2, PY_ALL_THREADS, &got, &res), 0);
  CHECK_EQ_INT(got.n, want_c.n);
  for (uint32_t i = 0; i < got.n && i < want_c.n; i++) {
    CHECK_EQ_STR(got.f[i].name, want_c.f[i].name);
    CHECK_EQ_STR(got.f[i].file, want_c.f[i].file);
    CHECK_EQ_INT(got.f[i].line, want_c.f[i].line);
  }
  /* and the same image claiming 3.14 is refused: the layouts differ */
  img_put64(rt, 8, 0x030E00F0);
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), -ENOTSUP);
  python_codecache_free(cc2);
  python_codecache_free(cc);
  free(m.arena);
}

/* ---- 3.14 asyncio (_AsyncioDebug) -------------------------------------- */

/* The module's _Py_AsyncioModuleDebugOffsets as the plugin finds it: in
 * this binary's own .AsyncioDebug section (where CPython puts it), as the
 * _asyncio extension's; the symbol is there too, the fallback. The TaskObj
 * offsets are made up (no 3.14 build here); the shape is CPython's. */
#define AT_SIZE 208
#define AT_NAME 144
#define AT_BY 64
#define AT_IS_TASK 72
#define AT_BY_IS_SET 73
#define AT_CORO 136
#define AT_NODE 176
#define ATS_LOOP (312 + 8) /* past sizeof(PyThreadState): _PyThreadStateImpl */
#define ATS_TASK (312 + 16)
#define ATS_HEAD (312 + 24)
__attribute__((section(".AsyncioDebug"), used)) uint64_t _AsyncioDebug[13] = {
    AT_SIZE, AT_NAME, AT_BY,    AT_IS_TASK, AT_BY_IS_SET, AT_CORO, AT_NODE,
    8192,    4096,    312 + 64, ATS_LOOP,   ATS_TASK,     ATS_HEAD};

/* A type object whose tp_name is name. */
static uint64_t aio_type(struct img *m, const char *name) {
  uint8_t *t = img_alloc(m, 64);
  img_put64(t, m->val.ob_size + 8, img_addr(name)); /* after ob_size */
  return img_addr(t);
}

/* A task named by name_obj, its coroutine's frame running code at unit. */
static uint8_t *aio_task(struct img *m, uint64_t task_type, uint64_t name_obj, uint64_t coro) {
  uint8_t *t = img_alloc(m, AT_SIZE);
  img_put64(t, m->val.ob_type, task_type);
  img_put64(t, AT_NAME, name_obj);
  img_put64(t, AT_CORO, coro);
  t[AT_IS_TASK] = 1;
  return t;
}

/* A suspended coroutine whose frame runs code at code unit 8 (line). */
static uint64_t aio_coro(struct img *m, const char *name, int first, int line) {
  uint8_t *c = img_alloc(m, m->val.gen_size);
  int lines[2] = {first, line};
  uint64_t code =
      img_code(m, img_cstr(m, name), img_cstr(m, name), img_cstr(m, "app.py"), first, lines, 2);
  img_frame(m, c + m->val.gen_iframe, code | 1, 0, img_instr(m, code, 8), 1);
  return img_addr(c);
}

static const struct want STACK_AIO[] = {
    {"compute", "app.py", 60, 62},
    {"worker", "app.py", 50, 53}, /* the running task's coroutine */
    {"Handle._run", "/usr/lib/python3.14/asyncio/events.py", 80, 88},
    {"BaseEventLoop._run_once", "/usr/lib/python3.14/asyncio/base_events.py", 1900, 1990},
    {"<module>", "app.py", 1, 99},
};
#define NAIO (sizeof(STACK_AIO) / sizeof(STACK_AIO[0]))

/* val: a default or a free-threaded (32-byte object header) build */
static void asyncio_314(const img_values *val, uint64_t version) {
  struct img m;
  img_init(&m, &IMG_POS_314, val, version, 4u << 20);
  uint32_t hdr = (uint32_t)m.val.ob_size;
  uint8_t *ts = img_thread(&m, 4242);
  uint64_t codes[NAIO];
  uint64_t leaf = build_stack(&m, ts, STACK_AIO, NAIO, 1, codes);
  uint64_t worker_frame;
  memcpy(&worker_frame, (uint8_t *)(uintptr_t)leaf + m.val.fr_previous, 8);

  struct py_proc p;
  char why[160] = "";
  CHECK_EQ_INT(attach_image(&m, &p, why, sizeof(why)), 0);
  CHECK_EQ_INT(p.off.gen_iframe, 80);
  /* the binary that holds the interpreter exports _AsyncioDebug */
  char exe[512];
  ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  CHECK(el > 0);
  exe[el > 0 ? el : 0] = 0;
  const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  size_t bl = strlen(base) < sizeof(p.module) - 1 ? strlen(base) : sizeof(p.module) - 1;
  memcpy(p.module, base, bl);
  p.module[bl] = 0;

  static const char str_name[] = "str", int_name[] = "int", task_name[] = "_asyncio.Task";
  uint64_t str_type = aio_type(&m, str_name), int_type = aio_type(&m, int_name);
  uint64_t task_type = aio_type(&m, task_name);
  uint64_t n_worker = img_cstr(&m, "worker"), n_batch = img_cstr(&m, "batch"),
           n_main = img_cstr(&m, "main");
  img_put64((uint8_t *)(uintptr_t)n_worker, m.val.ob_type, str_type);
  img_put64((uint8_t *)(uintptr_t)n_batch, m.val.ob_type, str_type);
  img_put64((uint8_t *)(uintptr_t)n_main, m.val.ob_type, str_type);
  uint8_t *n3 = img_alloc(&m, 48); /* int 3: an unnamed task, Task-3 */
  img_put64(n3, m.val.ob_type, int_type);
  img_put64(n3, hdr, 1u << 3); /* lv_tag: one digit, positive */
  img_put32(n3, hdr + 8, 3);

  /* running: worker <- Task-3 (await) <- batch (one of a set) <- main */
  uint8_t *t0 = aio_task(&m, task_type, n_worker, worker_frame - m.val.gen_iframe);
  uint8_t *t1 = aio_task(&m, task_type, img_addr(n3), aio_coro(&m, "gather_all", 20, 24));
  uint8_t *t2 = aio_task(&m, task_type, n_batch, aio_coro(&m, "run_batch", 30, 35));
  uint8_t *t3 = aio_task(&m, task_type, n_main, aio_coro(&m, "main", 40, 41));
  img_put64(t0, AT_BY, img_addr(t1));
  uint8_t *set = img_alloc(&m, 64), *table = img_alloc(&m, 16 * 8);
  img_put64(set, hdr + 16, 7); /* mask */
  img_put64(set, hdr + 24, img_addr(table));
  img_put64(table, 16 * 5, img_addr(t2));
  img_put64(t1, AT_BY, img_addr(set));
  t1[AT_BY_IS_SET] = 1;
  img_put64(t2, AT_BY, img_addr(t3));
  img_put64(ts, ATS_TASK, img_addr(t0));
  uint8_t *t4 = aio_task(&m, task_type, img_cstr(&m, "sleeper"), aio_coro(&m, "sleeper", 70, 72));
  img_put64((uint8_t *)(uintptr_t)pa_rd64(t4, AT_NAME), m.val.ob_type, str_type);
  img_put64(t4, AT_BY, img_addr(t3));
  /* the thread's task list: head (in the thread state) -> t0 .. t4 -> head */
  uint8_t *list[] = {t0, t1, t2, t3, t4};
  uint64_t head = img_addr(ts) + ATS_HEAD, prev_node = head;
  for (size_t i = 0; i < 5; i++) {
    uint64_t node = img_addr(list[i]) + AT_NODE;
    img_put64((uint8_t *)(uintptr_t)prev_node, 0, node);
    img_put64((uint8_t *)(uintptr_t)node, 8, prev_node);
    prev_node = node;
  }
  img_put64((uint8_t *)(uintptr_t)prev_node, 0, head);

  static const struct want WANT[] = {
      {"compute", "app.py", 60, 62},
      {"worker", "app.py", 50, 53},
      {"<task: worker>", "", 0, 0},
      {"gather_all", "app.py", 20, 24},
      {"<task: Task-3>", "", 0, 0},
      {"run_batch", "app.py", 30, 35},
      {"<task: batch>", "", 0, 0},
      {"main", "app.py", 40, 41},
      {"<task: main>", "", 0, 0},
      {"Handle._run", "/usr/lib/python3.14/asyncio/events.py", 80, 88},
      {"BaseEventLoop._run_once", "/usr/lib/python3.14/asyncio/base_events.py", 1900, 1990},
      {"<module>", "app.py", 1, 99},
  };
  /* wall mode: sleeper waits (on a plain future), awaited by main */
  static const struct want WAIT[] = {
      {"sleeper", "app.py", 70, 72},
      {"<task: sleeper>", "", 0, 0},
      {"main", "app.py", 40, 41},
      {"<task: main>", "", 0, 0},
      {"BaseEventLoop._run_once", "/usr/lib/python3.14/asyncio/base_events.py", 1900, 1990},
      {"<module>", "app.py", 1, 99},
  };
  /* every code object of the sample at once: 8 here, with 64 entries a
   * 4-way set could evict the leaf's entry while the chain is read */
  struct py_codecache *cc = python_codecache_new(1024);
  struct py_walker *w = python_walker_new(64);
  python_walker_set_async(w, true);
  struct collected c;
  struct py_sample_result res;
  for (int wall = 0; wall < 2; wall++) { /* cpu and wall (waiting tasks) */
    memset(&c, 0, sizeof(c));
    CHECK_EQ_INT(python_sample(w, &p, cc, wall ? PY_ALL_THREADS : PY_RUNNING_THREADS, NULL, collect,
                               &c, &res),
                 0);
    if (wall) {
      CHECK_EQ_INT(c.stacks, 2); /* the running chain, then the one waiting task */
      CHECK_EQ_INT(c.tids[1], 4242);
      check_stack(&c, WAIT, sizeof(WAIT) / sizeof(WAIT[0]));
    } else {
      CHECK_EQ_INT(c.stacks, 1);
      check_stack(&c, WANT, sizeof(WANT) / sizeof(WANT[0]));
    }
  }
  CHECK(w->async_scratch.a->dbgs[0].ok); /* found through the ELF symbol */

  /* a cycle (main awaited by Task-3) is refused whole: the plain stack,
   * and no waiting task either */
  img_put64(t3, AT_BY, img_addr(t1));
  memset(&c, 0, sizeof(c));
  CHECK_EQ_INT(python_sample(w, &p, cc, PY_ALL_THREADS, NULL, collect, &c, &res), 0);
  CHECK_EQ_INT(c.stacks, 1);
  check_stack(&c, STACK_AIO, NAIO);
  /* a task list that loops back on itself ends where it does */
  img_put64(t3, AT_BY, 0);
  img_put64(t4 + AT_NODE, 0, img_addr(t1) + AT_NODE);
  memset(&c, 0, sizeof(c));
  CHECK_EQ_INT(python_sample(w, &p, cc, PY_ALL_THREADS, NULL, collect, &c, &res), 0);
  CHECK_EQ_INT(c.stacks, 2);
  check_stack(&c, WAIT, sizeof(WAIT) / sizeof(WAIT[0]));
  img_put64(t4 + AT_NODE, 0, head);
  /* a running task that does not say it is a task: the plain stack */
  t0[AT_IS_TASK] = 0;
  memset(&c, 0, sizeof(c));
  CHECK_EQ_INT(python_sample(w, &p, cc, PY_RUNNING_THREADS, NULL, collect, &c, &res), 0);
  check_stack(&c, STACK_AIO, NAIO);
  t0[AT_IS_TASK] = 1;
  /* a running task whose coroutine is not on the stack: the plain stack */
  img_put64(ts, ATS_TASK, img_addr(t2));
  memset(&c, 0, sizeof(c));
  CHECK_EQ_INT(python_sample(w, &p, cc, PY_RUNNING_THREADS, NULL, collect, &c, &res), 0);
  check_stack(&c, STACK_AIO, NAIO);

  /* the parser refuses what does not fit, naming the field */
  struct pa_dbg d;
  uint64_t bad[13];
  memcpy(bad, _AsyncioDebug, sizeof(bad));
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), 0);
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 32, &d, why, sizeof(why)), 0);
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, 96, 16, &d, why, sizeof(why)), -EINVAL);
  bad[7] = 194968; /* a real interpreter state's size (3.13.0: ~190 KiB) */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), 0);
  bad[7] = 32u << 20; /* more than any CPython struct */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "interpreter size") != NULL);
  bad[7] = _AsyncioDebug[7];
  bad[1] = AT_SIZE - 4; /* task_name past the task */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "task_name") != NULL);
  bad[1] = 8; /* inside the object header */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), -EINVAL);
  bad[1] = AT_CORO; /* the same field as task_coro */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "task_coro") != NULL);
  bad[1] = AT_NAME;
  bad[0] = 1u << 20; /* an absurd TaskObj */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), -EINVAL);
  bad[0] = AT_SIZE;
  bad[11] = 1ull << 40; /* the running task far outside the thread state */
  CHECK_EQ_INT(pa_dbg_parse((const uint8_t *)bad, sizeof(bad), 16, &d, why, sizeof(why)), -EINVAL);
  CHECK(strstr(why, "asyncio_running_task") != NULL);
  python_walker_free(w);
  python_codecache_free(cc);
  free(m.arena);
}

int main(void) {
  asyncio_314(&IMG_VAL_314, 0x030E00F0);
  img_values v314t = img_free_threaded(&IMG_VAL_314);
  asyncio_314(&v314t, 0x030E02F0);
  image_314();
  images_other_layouts();
  prefetch_grown_stack();
  refusals_314();
  real_vs_image_313();
  return pp_test_finish("test_python_synthetic");
}
