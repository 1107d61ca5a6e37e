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
 *
 * Wall and off-CPU (V8_SAMPLE_WALL, V8_SAMPLE_OFFCPU): a second event per
 * thread, the software context-switch event with a period of 1, takes the
 * same registers and stack copy at the moment the thread leaves its CPU
 * (its user part is where it blocked or was preempted), and with
 * context_switch set the kernel adds a record when it comes back. The copy
 * is kept until then, and the time in between becomes samples: for wall,
 * whole sampling periods (the remainder carried to the thread's next time
 * off), so a thread off its CPU weighs what it would have weighed running;
 * for off-CPU, microseconds, for a thread that blocked (not one preempted,
 * which stays runnable). A thread still off its CPU at a drain is credited
 * its time so far. The cost is bounded by the rings: a thread switching
 * faster than they are drained fills its ring, and the kernel drops (and
 * counts) the records instead of copying stacks; a time off whose switch-out
 * was dropped is not credited (counted in switch_lost).
 */
#ifndef POLYPROF_NODEJS_V8_SAMPLE_H
#define POLYPROF_NODEJS_V8_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#define V8_SAMPLE_MAX_THREADS 256

struct v8_regs {
  uint64_t bp, sp, ip;
};

/* Flags of v8_sampler_open. */
#define V8_SAMPLE_WALL 1u   /* threads off their CPU too, in sampling periods */
#define V8_SAMPLE_OFFCPU 2u /* blocked threads' time, in microseconds */

/* One sample, valid during the callback only. */
struct v8_raw_sample {
  uint32_t tid;
  struct v8_regs regs;
  const unsigned char *stack; /* copy of [regs.sp, regs.sp + stack_len) */
  size_t stack_len;
  uint64_t count; /* samples, or microseconds for an off-CPU one */
  uint32_t type;  /* enum pp_profile_type: PP_PROFILE_CPU (plain) or PP_PROFILE_OFFCPU */
  int off_cpu;    /* taken as the thread left its CPU */
};

typedef void (*v8_sample_fn)(void *ctx, const struct v8_raw_sample *s);

/* A thread's context-switch event and the time off its CPU being measured. */
struct v8_switch {
  int fd;
  void *ring;
  int pending;       /* a switch-out sample is kept, its switch-in not seen */
  int preempted;     /* that switch-out left the thread runnable */
  uint64_t out_ns;   /* when it left (CLOCK_MONOTONIC), or was last credited */
  uint64_t carry_ns; /* wall: time off not yet a whole period */
  struct v8_regs regs;
  unsigned char *stack; /* stack_bytes, allocated at the first switch-out */
  size_t stack_len;
};

struct v8_thread_ev {
  uint32_t tid;
  int fd;
  void *ring;
  int seen; /* listed in /proc at the last rescan */
  struct v8_switch sw;
};

struct v8_sampler {
  uint32_t pid;
  uint64_t period_ns;
  uint32_t stack_bytes; /* copied per sample */
  size_t ring_bytes;    /* data pages of each ring */
  size_t sw_ring_bytes; /* of each context-switch event's ring */
  struct v8_thread_ev th[V8_SAMPLE_MAX_THREADS];
  size_t nth;
  uint32_t max_threads;
  uint32_t flags;        /* V8_SAMPLE_* */
  uint64_t lost;         /* samples the kernel could not write (ring full) */
  uint64_t switch_lost;  /* times off a CPU not credited: their switch-out was dropped */
  unsigned char *linear; /* a record that wraps the ring end, made contiguous */
  size_t linear_cap;
};

/* Opens one event per thread of pid (at most max_threads), two with
 * flags (V8_SAMPLE_*). 0, or -errno (-EACCES/-EPERM: perf_event_open
 * refused, -ESRCH: gone). */
int v8_sampler_open(struct v8_sampler *s, uint32_t pid, uint32_t hz, uint32_t stack_bytes,
                    uint32_t max_threads, uint32_t flags);
/* Follows the process's thread list: events for new threads, closed for
 * gone ones. Returns the number of threads sampled, or -ESRCH. */
int v8_sampler_rescan(struct v8_sampler *s);
/* Calls fn for every sample recorded since the previous drain (and, with
 * flags, for the time threads spent off their CPU since). */
size_t v8_sampler_drain(struct v8_sampler *s, v8_sample_fn fn, void *ctx);
void v8_sampler_close(struct v8_sampler *s);

#endif
