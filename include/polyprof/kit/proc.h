/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small, bounded readers of /proc. Everything read here comes from another
 * process and is treated as hostile: reads are size-capped, strings are
 * NUL-terminated and truncated, numbers are range-checked.
 */
#ifndef POLYPROF_KIT_PROC_H
#define POLYPROF_KIT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Read at most cap-1 bytes of a file, NUL-terminate. *len (optional) gets the
 * byte count. 0 or -errno. */
int pp_read_file(const char *path, char *buf, size_t cap, size_t *len);

int pp_proc_comm(uint32_t pid, char *buf, size_t len); /* /proc/PID/comm, no newline */
int pp_proc_exe(uint32_t pid, char *buf, size_t len);  /* readlink /proc/PID/exe */
int pp_proc_cwd(uint32_t pid, char *buf, size_t len);  /* readlink /proc/PID/cwd */
/* argv as NUL-separated strings; *len = bytes. */
int pp_proc_cmdline(uint32_t pid, char *buf, size_t cap, size_t *len);
/* innermost pid from /proc/PID/status NSpid: (== pid outside namespaces) */
int pp_proc_ns_pid(uint32_t pid, uint32_t *ns_pid);

/* In the text of a /proc/PID/status file, the rest of the line that starts
 * with key (such as "Uid:"), or NULL. */
const char *pp_proc_status_field(const char *status_text, const char *key);
/* field 22 of /proc/PID/stat, clock ticks since boot */
int pp_proc_start_time(uint32_t pid, uint64_t *start_time);
/* Both of the above from one read of /proc/PID/stat (a liveness check that
 * also sees zombies). */
int pp_proc_start_state(uint32_t pid, uint64_t *start_time, char *state);
/* Which file the process runs: device and inode of /proc/PID/exe folded
 * into one number, 0 if unknown (kernel thread, gone). An exec keeps pid and
 * start time; this changes with it (one stat, no read). */
uint64_t pp_proc_exe_id(uint32_t pid);
/* one-letter state of /proc/PID/task/TID/stat (tid 0: the process) */
int pp_proc_state(uint32_t pid, uint32_t tid, char *state);
/* VmRSS in KiB */
int pp_proc_rss_kb(uint32_t pid, uint64_t *kb);
/* utime+stime of the process in clock ticks */
int pp_proc_cpu_ticks(uint32_t pid, uint64_t *ticks);
/* "/proc/PID/root" */
int pp_proc_root(uint32_t pid, char *buf, size_t len);
/* True if the file `sb` describes was last written well before pid started:
 * a /tmp/perf-PID.map or jit-PID.dump left by an earlier process with the
 * same pid, which must not name this one's code. */
bool pp_proc_file_predates(uint32_t pid, const struct stat *sb);
/* True if pid's /proc/PID/stat start time equals start_time (identity check
 * before signalling or attaching). */
int pp_proc_same_process(uint32_t pid, uint64_t start_time);

#endif
