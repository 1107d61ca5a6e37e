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
  uint64_t samples;    /* walked */
  uint64_t js_samples; /* gave at least one JS frame */
  uint64_t torn;       /* dropped: a JS frame's objects changed under the read */
  uint64_t no_js;      /* no JS frame in the chain (native code, GC, idle loop) */
  uint64_t short_copy; /* the chain left the copied stack: outer frames missing */
  uint64_t cache_miss; /* functions resolved from the heap */
  uint64_t scanned;    /* chains found by scanning the copy for an exit frame */
  uint64_t inlined;    /* frames of functions inlined into optimized code */
};

struct v8_reader {
  uint32_t pid;
  struct v8_layout L;
  struct v8_fn *cache;
  uint32_t cache_cap; /* entries, a power of two */
  uint32_t clock;
  struct v8_walk_stats st;
};

/* 0 or -ENOMEM. cache_entries is rounded up to a power of two (>= 16). */
int v8_reader_init(struct v8_reader *r, uint32_t pid, const struct v8_layout *L,
                   uint32_t cache_entries);
void v8_reader_free(struct v8_reader *r);

/* The JS frames of sample s, leaf first, into frames[0..max) (kind
 * PP_FRAME_JS; strings valid until the next call). Returns the count (0:
 * no JS frame), or -EAGAIN when the sample was dropped as torn. */
int v8_walk(struct v8_reader *r, const struct v8_raw_sample *s, struct pp_frame *frames,
            uint32_t max);

#endif
