/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The v8 mode of the nodejs plugin: JavaScript stacks read from outside the
 * process. Nothing is signalled, loaded, opened or written in the target:
 * the kernel samples its threads (v8_sample.c), the agent walks the frames
 * of each sample (v8_walk.c) with the layouts V8 publishes in its own
 * binary (v8_layout.c), reading heap objects with process_vm_readv
 * (v8_heap.c).
 */
#ifndef POLYPROF_NODEJS_V8_MODE_H
#define POLYPROF_NODEJS_V8_MODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

struct nodejs_state;
struct nodejs_v8;

struct nodejs_v8_config {
  uint32_t hz;
  uint32_t stack_bytes;   /* user stack copied per sample */
  uint32_t cache_entries; /* functions remembered per process */
  uint32_t max_threads;   /* threads sampled per process */
  uint32_t max_depth;     /* JS frames kept per stack */
  size_t max_targets;
  uint64_t retry_ns;
  bool wall;   /* threads off their CPU too (nodejs.include_idle: --mode wall) */
  bool offcpu; /* --mode offcpu: blocked threads' JS stacks, in microseconds */
};

struct nodejs_v8 *nodejs_v8_new(const struct pp_host *host, const struct nodejs_v8_config *cfg);
void nodejs_v8_free(struct nodejs_v8 *v);
int nodejs_v8_add(struct nodejs_v8 *v, const struct pp_target *tg, size_t n);
/* How often tick() should run at hz samples per second per thread. */
uint64_t nodejs_v8_tick_ns(uint32_t hz);
/* Drains the samples of every target into its stacks. */
void nodejs_v8_tick(struct nodejs_v8 *v);
void nodejs_v8_snapshot(struct nodejs_v8 *v, struct pp_sink *sink);
/* dump(): the JS stack every thread of every attached target is in now,
 * each thread held an instant (polyprof/kit/thread_snapshot.h); threads
 * without a JS frame are not emitted (the perf plugin's native stack
 * shows them). */
int nodejs_v8_dump(struct nodejs_v8 *v, struct pp_sink *sink);

#endif
