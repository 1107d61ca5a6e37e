/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process tree below one process, from /proc: what a profiler that is
 * asked for a program and its subprocesses needs when the program may have
 * started children before the profiler looked; and the threads of one.
 */
#ifndef POLYPROF_KIT_PROC_TREE_H
#define POLYPROF_KIT_PROC_TREE_H

#include <stddef.h>
#include <stdint.h>

/* The processes /proc lists at most (a bound on the walk's memory). */
#define PP_PROC_TREE_MAX_PROCS 1048576

/* The descendants of root (root itself not included), breadth first, at
 * most cap of them into out; how many were stored. One read of every
 * process's /proc/PID/stat (a parent pid each, parsed after the last ')'
 * of the comm), so a caller on a large host calls it sparingly. */
size_t pp_proc_descendants(uint32_t root, uint32_t *out, size_t cap);

/* The thread ids of pid (/proc/PID/task), at most cap into tids, *n of
 * them. 0, or -errno of the directory (-ENOENT: the process is gone). */
int pp_proc_threads(uint32_t pid, uint32_t *tids, size_t cap, size_t *n);

#endif
