/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Is this thread on a CPU? Per-thread state of one target process, read
 * from /proc/PID/task/TID/{stat,schedstat} through descriptors kept open
 * and re-read with pread() (one system call per thread per look instead of
 * three). A descriptor is closed as soon as its thread is gone (the read
 * fails), when its thread was not asked about for a while (sweep), or with
 * the whole set (free); the number kept per process is bounded.
 */
#ifndef POLYPROF_KIT_THREAD_CPU_H
#define POLYPROF_KIT_THREAD_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pp_thread_cpu;

/* For process pid; at most max_threads kept open (0: 64; least recently
 * used evicted). */
struct pp_thread_cpu *pp_thread_cpu_new(uint32_t pid, uint32_t max_threads);
/* Closes every descriptor. */
void pp_thread_cpu_free(struct pp_thread_cpu *c);

/* The state letter of host thread tid ('R', 'S', 'D'...), or 0 if the
 * thread is gone. */
char pp_thread_cpu_state(struct pp_thread_cpu *c, uint32_t tid);

/* 1 if tid ran since the previous call for it and is runnable now, 0 if
 * not, -ESRCH if it is gone. "Ran" is its schedstat run time advancing: a
 * thread waiting in a run queue is in state R without running, and
 * counting it would weigh its wait as CPU time. Without schedstats (a
 * kernel built without them) the state letter alone answers. The first
 * call for a thread answers by its state letter. */
int pp_thread_cpu_ran(struct pp_thread_cpu *c, uint32_t tid);

/* Nanoseconds the threads of the set ran, summed, since the previous call
 * (each one's schedstat run time: one pread per thread, the cheapest look
 * there is), or -1 if the set cannot tell: empty, full (a thread may have
 * been evicted), a thread seen for the first time, one gone (its
 * descriptors close), no schedstats. At least 1 for a thread switched in
 * since, whose run time the kernel adds only at its next scheduler tick.
 * 0 means no thread was switched in and none ran, so none that was not
 * running at the previous call runs now: a sampler can skip the process
 * instead of reading its memory (a thread that was running then may still
 * be, its run time not yet updated: look at its state). The set
 * must hold every thread that matters (every thread the sampler asked
 * about with pp_thread_cpu_state/ran). Keeps its own memory of run times,
 * apart from pp_thread_cpu_ran's. */
int64_t pp_thread_cpu_ran_ns(struct pp_thread_cpu *c);

/* 1 if a thread of the set is in state R now (one pread of its stat file
 * each, stopping at the first), 0 if none, -1 if the set is empty. */
int pp_thread_cpu_any_running(struct pp_thread_cpu *c);

/* Closes the descriptors of threads not asked about since the previous
 * sweep (call once a snapshot or so). */
void pp_thread_cpu_sweep(struct pp_thread_cpu *c);

/* Descriptors held now (tests, leak checks). */
size_t pp_thread_cpu_fds(const struct pp_thread_cpu *c);

#ifdef __cplusplus
}
#endif

#endif
