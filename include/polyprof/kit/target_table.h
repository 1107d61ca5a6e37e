/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The target table: the processes a runtime plugin was handed, and what it
 * knows of each. It implements the target contract of plugin.h once, for
 * every plugin:
 *
 *  - a target is a process: (pid, start time). A pid announced again with
 *    another start time is a new process that reused the pid: the old
 *    entry is released and the new one attached.
 *  - the same pid and start time announced again with another executable
 *    image is an exec: the old image's state is released and the process
 *    is looked at again (attach), as a new target. The same image announced
 *    again (every session's start() re-announces the current set) changes
 *    nothing.
 *  - attach() may say "not yet" (a negative errno: an interpreter still
 *    starting): it is retried with exponential backoff from poll(), a
 *    bounded number of times, then reported as an error with its reason.
 *    It may say the process is not one of this plugin's (ignored, silently),
 *    or that it cannot be profiled (skipped or failed, with a reason).
 *  - the status of every target that is not profiled is reported through
 *    host->set_pid_status() at every snapshot, so each profile says why.
 *  - a gone target (exit seen by the plugin, or the snapshot's liveness
 *    check) has its per-target state released at once, through release(),
 *    which closes its descriptors: nothing is held for a dead process.
 *
 * Single-threaded, like the vtable calls. Entries are stable pointers
 * until they are removed (at report, or at free).
 */
#ifndef POLYPROF_KIT_TARGET_TABLE_H
#define POLYPROF_KIT_TARGET_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

enum pp_target_state {
  PP_TARGET_PENDING = 0,  /* attach not done or to be retried */
  PP_TARGET_ATTACHED = 1, /* being profiled */
  PP_TARGET_IGNORED = 2,  /* not this plugin's: no status, until its image changes */
  PP_TARGET_SKIPPED = 3,  /* cannot be profiled: "[Profiling skipped: reason]" */
  PP_TARGET_FAILED = 4,   /* attach failed for good: "[Profiling error: reason]" */
  PP_TARGET_GONE = 5,     /* exited: released, removed at the next report */
};

/* What attach() returns besides 0 (attached) and a negative errno (not
 * yet: retry with backoff). */
#define PP_ATTACH_IGNORE 1 /* not a process of this plugin's runtime */
#define PP_ATTACH_SKIP 2   /* cannot be profiled (unsupported version...): t->reason says why */
#define PP_ATTACH_FAIL 3   /* failed for good: t->reason says why */

struct pp_target_entry {
  uint32_t pid;
  uint32_t attempts; /* attach() calls for the current image */
  uint64_t start_time;
  uint64_t exe_id; /* identity of the executable image when announced */
  int state;       /* enum pp_target_state */
  int last_error;  /* the last negative errno of attach(), 0 if none */
  uint64_t next_try_ns;
  uint64_t attached_ns; /* when attach() succeeded */
  char reason[192];     /* why it is not profiled (set by attach(), or by the table) */
  void *data;           /* the plugin's per-target state */
};

struct pp_target_ops {
  /* Looks closer at a new process (or a new image): sets t->data on
   * success. Returns 0, PP_ATTACH_*, or a negative errno (retry later;
   * -ESRCH: the process is gone). Write a reason into t->reason for
   * anything but 0 and PP_ATTACH_IGNORE. */
  int (*attach)(void *plugin, struct pp_target_entry *t);
  /* Frees t->data (NULL-safe, may be NULL itself): the target is gone,
   * exec'd, or the table is freed. Must close every descriptor held for it. */
  void (*release)(void *plugin, struct pp_target_entry *t);
};

struct pp_target_table_config {
  size_t max_targets;      /* 0: 65536. Beyond: skipped, "too many targets" */
  uint32_t retry_attempts; /* attach() calls before giving up (0: 12) */
  uint64_t retry_first_ns; /* first retry after this (0: 250 ms), doubling... */
  uint64_t retry_max_ns;   /* ...up to this (0: 10 s) */
  uint64_t liveness_ns;    /* poll() checks each attached target this often (0: only at
                            * report): exit, pid reuse, and exec (a new executable file,
                            * then released and attached again) */
};

struct pp_target_table;

struct pp_target_table *pp_target_table_new(const struct pp_host *host,
                                            const struct pp_target_ops *ops, void *plugin,
                                            const struct pp_target_table_config *config);
/* Releases every entry. */
void pp_target_table_free(struct pp_target_table *tt);

/* add_targets(): new processes, pid reuse and exec handled as above. New
 * targets are attached at once (their first attempt). 0 or -ENOMEM. */
int pp_target_table_add(struct pp_target_table *tt, const struct pp_target *targets, size_t n);

/* tick(): retries the pending targets that are due, and checks liveness if
 * configured. Cheap when nothing is due. */
void pp_target_table_poll(struct pp_target_table *tt, uint64_t now_ns);

/* The plugin saw the process exit (-ESRCH from a read): released now. */
void pp_target_table_gone(struct pp_target_table *tt, struct pp_target_entry *t);

/* The plugin saw a new program image in the process (an exec it noticed
 * itself, e.g. by its memory layout): its state is released and it is
 * attached again now, as after an exec re-announcement. */
void pp_target_table_reattach(struct pp_target_table *tt, struct pp_target_entry *t);

/* The plugin lost a target it had attached (its connection to the runtime
 * was closed, a late step of an asynchronous attach failed): its state is
 * released and it is pending again, its attach retried after delay_ns (0:
 * the table's backoff), counted as an attempt of a new attach cycle.
 * t->reason, set by the caller, is its error status meanwhile. err is a
 * negative errno. */
void pp_target_table_retry(struct pp_target_table *tt, struct pp_target_entry *t, int err,
                           uint64_t delay_ns);

/* snapshot(): checks that every target is still the process it was
 * (releasing the gone ones), reports each non-profiled target's status to
 * the sink, adds the counters "targets_attached", "targets_pending",
 * "targets_failed" when non-zero, and removes gone entries. */
void pp_target_table_report(struct pp_target_table *tt, struct pp_sink *sink);

/* The entry of pid, or NULL. */
struct pp_target_entry *pp_target_table_find(const struct pp_target_table *tt, uint32_t pid);

/* Iteration over entries in a given state (-1: any): start with *cursor = 0,
 * NULL at the end. Calling pp_target_table_gone() on the current entry
 * while iterating is fine; adding is not. */
struct pp_target_entry *pp_target_table_next(const struct pp_target_table *tt, size_t *cursor,
                                             int state);

/* Number of entries in a state (-1: all). */
size_t pp_target_table_count(const struct pp_target_table *tt, int state);

#define PP_TARGETS_FOREACH(tt, t, state) \
  for (size_t pp_cur_ = 0; ((t) = pp_target_table_next((tt), &pp_cur_, (state))) != NULL;)

#ifdef __cplusplus
}
#endif

#endif
