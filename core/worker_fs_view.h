/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file system a plugin worker sees: a mount namespace of its own in
 * which every mount is read-only except the worker's runtime directory
 * (/run/polyprof/<plugin>: what a worker publishes, such as the java
 * plugin's perf map copies, goes there). Made in the forked child before exec,
 * while it still holds the agent's CAP_SYS_ADMIN. What this stops and what
 * it does not: docs/security.md, "The file system the worker sees".
 */
#ifndef PP_WORKER_FS_VIEW_H
#define PP_WORKER_FS_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#define PP_FS_VIEW_MAX_PATH 256
#define PP_FS_VIEW_WRITABLE 1

struct pp_fs_view {
  bool on; /* false: the worker shares the agent's view (why says why) */
  char writable[PP_FS_VIEW_WRITABLE][PP_FS_VIEW_MAX_PATH]; /* "" = unused */
  char why[160];
};

/* The steps of pp_fs_view_enter(), for the note a failed one sends. */
enum pp_fs_view_step {
  PP_FS_VIEW_UNSHARE = 1,
  PP_FS_VIEW_PROPAGATION = 2,
  PP_FS_VIEW_READ_ONLY = 3,
  PP_FS_VIEW_WRITABLE_BIND = 4,
};

/* In the agent, before fork: whether the worker of `plugin` gets its view
 * (root with CAP_SYS_ADMIN, and not inline), and its runtime directory,
 * created (0700, ours, not a link) so that it exists to be bound. */
void pp_fs_view_prepare(const char *plugin, struct pp_fs_view *v);

/* In the forked child, before its capabilities are cut (async-signal-safe:
 * raw system calls only). 0, or -errno with *step set. A failure before
 * PP_FS_VIEW_WRITABLE_BIND leaves the namespace as writable as the
 * agent's view; at that step everything stays read-only (the directory
 * that could not be bound included). */
int pp_fs_view_enter(const struct pp_fs_view *v, int *step);

/* "making it read-only", ... for a log line. */
const char *pp_fs_view_step_name(int step);

/* One line for `polyprof check`: what a worker of `plugin` would see. */
void pp_fs_view_describe(const char *plugin, char *buf, size_t len);

#endif
