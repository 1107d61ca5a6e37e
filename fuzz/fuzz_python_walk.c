/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the python plugin's walk of a target's memory
 * (plugins/python: locate.c's checks, walk.c, codecache.c, linetable.c)
 * over a memory image (fuzz_memimage.h) standing for the process: for
 * 3.13+ the _Py_DebugOffsets read from the image, then the interpreter
 * list, thread states, frames, code objects, strings and line tables,
 * sampled twice (the second sample starts from what the first one found,
 * as the sampler's prefetch does), then again async-aware: in wall mode
 * the task registry, the waiting tasks, their coroutine chains and the
 * tasks awaiting them (await, gather(), TaskGroup: closures, bound
 * methods, instance attributes); on the GIL holder the running task's
 * chain. Every pointer and length comes from the
 * target. Seeds are images recorded from real CPython 2.7 to 3.13
 * processes (seed_python_image).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_memimage.h"
#include "fuzz_python_walk.h"
#include "polyprof/kit/remote.h"
#include "python.h"

static uint64_t sink;

static void on_stack(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t n,
                     bool truncated) {
  (void)ctx, (void)tid, (void)truncated;
  if (n > 64 + PY_EXTRA_FRAMES) abort();
  for (uint32_t i = 0; i < n; i++) {
    const struct py_code *c = frames[i].code;
    if (!c && !frames[i].pseudo) abort(); /* a frame is code or a named pseudo frame */
    if (!c) sink += strlen(frames[i].pseudo);
    if (c && c->name) sink += strlen(c->name);
    if (c && c->file) sink += strlen(c->file);
  }
}

static int setup(struct py_proc *p, const struct py_image_hdr *h) {
  memset(p, 0, sizeof(*p));
  p->pid = p->ns_pid = 4242; /* the image answers for any pid */
  p->pthread_tid_off = -1;
  if (h->major == 3 && h->minor >= 13) {
    uint8_t dbg[PY_DEBUG_OFFSETS_READ];
    char why[160];
    if (pp_remote_read(4242, h->runtime, dbg, sizeof(dbg)) < 0 ||
        python_setup_from_debug(p, h->runtime, dbg, sizeof(dbg), why, sizeof(why)) < 0)
      return -1;
  } else {
    if (python_offsets_for(h->major, h->minor, h->micro, &p->off) < 0) return -1;
    p->major = h->major, p->minor = h->minor, p->micro = h->micro;
    p->interp_head = h->interp_head;
  }
  p->runtime = h->runtime;
  p->tstate_cur = h->tstate_cur;
  p->pycode_type = h->pycode_type;
  p->map_lo = h->map_lo, p->map_hi = h->map_hi;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct py_image_hdr h;
  if (!pp_fuzz_image_load(data, size, sizeof(h))) return 0;
  memcpy(&h, data, sizeof(h));
  struct py_proc p;
  if (setup(&p, &h) == 0) {
    (void)python_validate(&p);
    struct py_walker *w = python_walker_new(64);
    struct py_codecache *cc = python_codecache_new(32);
    if (!w || !cc) abort();
    /* every thread filter; <GC> frames (the collector's flag, the GIL
     * holder) and the main-thread filter on the later passes */
    static const enum py_thread_filter filters[] = {
        PY_ALL_THREADS, PY_GIL_THREAD, PY_EXCEPTION_THREADS, PY_ALL_THREADS, PY_GIL_THREAD};
    for (int i = 0; i < 5; i++) {
      struct py_sample_result res;
      python_walker_set_gc(w, i >= 2);
      python_walker_set_main_only(w, i == 3);
      python_walker_set_async(w, i >= 2);
      python_walker_set_opcodes(w, i >= 2);
      (void)python_sample(w, &p, cc, filters[i], NULL, on_stack, NULL, &res);
    }
    python_codecache_free(cc);
    python_walker_free(w);
  }
  pp_fuzz_image_unload();
  return 0;
}
