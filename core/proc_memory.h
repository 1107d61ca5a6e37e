/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agent learnt about each process while it was alive: comm,
 * executable, runtime, appid, container id and the core's application
 * metadata. A process is read when the /proc scan (or a plugin's target
 * list) first shows it, so a process that exits before its session is
 * written still has its name, container and appid on every sample.
 *
 * Bounded: one LRU of `capacity` processes keyed by (pid, start time),
 * plus a pid -> newest start time index of the same size, which answers
 * for profile records that carry a pid only (plugins report pids, not
 * start times). A process that exited is kept for the session it exited
 * in and the next one (a plugin may hand over its last stacks a snapshot
 * late), then forgotten.
 */
#ifndef PP_PROC_MEMORY_H
#define PP_PROC_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "appid.h"

struct pp_enrich_opts;

/* One remembered process. Owned by the memory; valid until the next call
 * that may evict (see, get, end_session). */
struct pp_proc_facts {
  char *comm;            /* NULL if unknown */
  char *exe;             /* NULL if unreadable */
  uint64_t exe_id;       /* pp_proc_exe_id when read: an exec changes it */
  char *appid;           /* NULL if no rule matched (or appids are off) */
  char container_id[65]; /* "" if not in a container (or containers are off) */
  enum pp_runtime rt;
  bool unsettled; /* exe switched but argv not laid out yet: read again */
  bool meta_done; /* core_meta was collected (or could not be) */
  bool gone;      /* seen exited at the end of a session */
  json_t *core_meta;
};

struct pp_proc_memory;

/* opts is borrowed (the enricher's) and must outlive the memory; it says
 * what to compute (appids, containers, application metadata). */
struct pp_proc_memory *pp_proc_memory_new(const struct pp_enrich_opts *opts, size_t capacity);
void pp_proc_memory_free(struct pp_proc_memory *m);

/* Learn (pid, start_time) now if it is alive and not known yet, or read it
 * again if it exec'd since. start_time 0: the pid's current process. */
void pp_proc_memory_see(struct pp_proc_memory *m, uint32_t pid, uint64_t start_time);

/* The facts about a profile's pid record: the process (pid, start_time)
 * if start_time is set, else the pid's live process, else the newest
 * process remembered with that pid. *live says whether the pid still names
 * that process (its /proc files may be read). NULL if nothing is known. */
struct pp_proc_facts *pp_proc_memory_get(struct pp_proc_memory *m, uint32_t pid,
                                         uint64_t start_time, bool *live);

/* At the end of a session: forget processes that had already exited at
 * the previous call. */
void pp_proc_memory_end_session(struct pp_proc_memory *m);

size_t pp_proc_memory_count(const struct pp_proc_memory *m);

#endif
