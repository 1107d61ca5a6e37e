/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registers and the top of the user stack of a target's threads, taken
 * by the kernel: one perf software cpu-clock event per thread (it fires
 * only while the thread runs, at the session frequency) records the user
 * frame pointer, stack pointer and instruction pointer and a copy of the
 * stack above the stack pointer into a ring buffer the agent maps. Nothing
 * stops or signals the target; the copy is taken at the sample instant,
 * so the frame chain in it is consistent (heap objects it points to are
 * read later, and are checked).
 */
#ifndef POLYPROF_NODEJS_V8_SAMPLE_H
#define POLYPROF_NODEJS_V8_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#define V8_SAMPLE_MAX_THREADS 256

struct v8_regs {
  uint64_t bp, sp, ip;
};

/* One sample, valid during the callback only. */
struct v8_raw_sample {
  uint32_t tid;
  struct v8_regs regs;
  const unsigned char *stack; /* copy of [regs.sp, regs.sp + stack_len) */
  size_t stack_len;
};

typedef void (*v8_sample_fn)(void *ctx, const struct v8_raw_sample *s);

struct v8_thread_ev {
  uint32_t tid;
  int fd;
  void *ring;
  int seen; /* listed in /proc at the last rescan */
};

struct v8_sampler {
  uint32_t pid;
  uint64_t period_ns;
  uint32_t stack_bytes; /* copied per sample */
  size_t ring_bytes;    /* data pages of each ring */
  struct v8_thread_ev th[V8_SAMPLE_MAX_THREADS];
  size_t nth;
  uint32_t max_threads;
  uint64_t lost;         /* samples the kernel could not write (ring full) */
  unsigned char *linear; /* a record that wraps the ring end, made contiguous */
  size_t linear_cap;
};

/* Opens one event per thread of pid (at most max_threads). 0, or -errno
 * (-EACCES/-EPERM: perf_event_open refused, -ESRCH: gone). */
int v8_sampler_open(struct v8_sampler *s, uint32_t pid, uint32_t hz, uint32_t stack_bytes,
                    uint32_t max_threads);
/* Follows the process's thread list: events for new threads, closed for
 * gone ones. Returns the number of threads sampled, or -ESRCH. */
int v8_sampler_rescan(struct v8_sampler *s);
/* Calls fn for every sample recorded since the previous drain. */
size_t v8_sampler_drain(struct v8_sampler *s, v8_sample_fn fn, void *ctx);
void v8_sampler_close(struct v8_sampler *s);

#endif
