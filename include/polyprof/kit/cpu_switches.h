/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which processes are runnable right now (on a CPU, or preempted and
 * waiting in a run queue: state R of a thread that has run), without a
 * system call per process: one perf context-switch record stream per CPU
 * (a software dummy event with context_switch set, so the kernel writes a
 * record at every switch in and out). Reading the rings once a tick keeps,
 * per CPU, the process running on it and, per thread, whether it was last
 * switched out preempted; a sampler then asks about each target in memory
 * instead of reading its /proc files. A thread woken but not yet run since
 * is not counted (it has not run: nothing to sample yet).
 *
 * Needs CAP_PERFMON (CAP_SYS_ADMIN before 5.8), CAP_IPC_LOCK past
 * perf_event_mlock_kb. Pids are those of the caller's PID namespace (0 for
 * a process outside it).
 */
#ifndef POLYPROF_KIT_CPU_SWITCHES_H
#define POLYPROF_KIT_CPU_SWITCHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pp_cpu_switches;

/* One stream per possible CPU, each a ring of ring_pages pages (a power of
 * two; 0: 32, about 2,700 switches per CPU between two reads). NULL with
 * the reason in why when the kernel refuses. */
struct pp_cpu_switches *pp_cpu_switches_open(uint32_t ring_pages, char *why, size_t why_len);
void pp_cpu_switches_close(struct pp_cpu_switches *s);

/* Reads every CPU's new records. 0 when the answers below are exact; 1
 * when they cannot be trusted for this tick: a ring overflowed, or a CPU
 * has not switched since the streams were opened, more threads switched
 * than are tracked between two reads. */
int pp_cpu_switches_read(struct pp_cpu_switches *s);

/* Is a thread of process pid (a thread group id) on a CPU or preempted and
 * waiting for one, as of the last read? */
bool pp_cpu_switches_runnable(const struct pp_cpu_switches *s, uint32_t pid);

/* Records lost to full rings since opened (a rate too high for the ring). */
uint64_t pp_cpu_switches_lost(const struct pp_cpu_switches *s);

#ifdef __cplusplus
}
#endif

#endif
