/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JavaScript frames of one sample: the frame-pointer chain in the copied
 * stack (V8's generated code always keeps frame pointers, and so does
 * Node's C++), each JS frame's function read from the live heap, and a
 * bounded per-process cache of what a SharedFunctionInfo resolves to.
 */
#ifndef POLYPROF_NODEJS_V8_WALK_H
#define POLYPROF_NODEJS_V8_WALK_H

#include <stdint.h>

#include "polyprof/plugin.h"
#include "v8_heap.h"
#include "v8_layout.h"
#include "v8_sample.h"

#define V8_MAX_FRAMES 512 /* JS frames per sample */
#define V8_MAX_HOPS 4096  /* frame-pointer hops per sample */

struct v8_fn;

/* Why a sample gave no stack, or how it went (counters since the last
 * snapshot). */
struct v8_walk_stats {
  uint64_t samples;      /* walked */
  uint64_t js_samples;   /* gave at least one JS frame */
  uint64_t torn;         /* dropped: a JS frame's objects changed under the read */
  uint64_t no_js;        /* no JS frame in the chain (native code, GC, idle loop) */
  uint64_t short_copy;   /* the chain left the copied stack: outer frames missing */
  uint64_t cache_miss;   /* functions resolved from the heap */
  uint64_t scanned;      /* chains found by scanning the copy for an exit frame */
  uint64_t inlined;      /* frames of functions inlined into optimized code */
  uint64_t unclassified; /* JS frames whose tier could not be told (kind PP_FRAME_JS) */
  uint64_t native;       /* C++ frames named */
};

struct v8_reader {
  uint32_t pid;
  struct v8_layout L;
  struct v8_fn *cache;
  uint32_t cache_cap; /* entries, a power of two */
  uint32_t clock;
  struct v8_walk_stats st;
  /* names the C++ frame executing at pc (a return address if is_return)
   * into *f: 0, or -1 (no name: not shown); NULL: JS frames only */
  int (*native)(void *ctx, uint64_t pc, int is_return, struct pp_frame *f);
  /* whether pc is in the file holding V8 (its embedded builtins: the
   * interpreter); NULL: unknown, no frame is told interpreted by its pc */
  int (*in_v8_module)(void *ctx, uint64_t pc);
  void *native_ctx;
};

/* 0 or -ENOMEM. cache_entries is rounded up to a power of two (>= 16). */
int v8_reader_init(struct v8_reader *r, uint32_t pid, const struct v8_layout *L,
                   uint32_t cache_entries);
void v8_reader_free(struct v8_reader *r);

/* The frames of sample s, leaf first, into frames[0..max): JS frames
 * with their tier (PP_FRAME_JS_*, PP_FRAME_JS when it could not be told)
 * and, with r->native, the C++ frames of the chain that have a name
 * (strings valid until the next call). Returns the count (0: nothing
 * named), or -EAGAIN when the sample was dropped as torn. */
int v8_walk(struct v8_reader *r, const struct v8_raw_sample *s, struct pp_frame *frames,
            uint32_t max);

#endif
