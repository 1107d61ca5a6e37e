/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plugin registry and supervised plugin workers.
 *
 * Registry: every *.so in the plugin directory is probed in a short-lived
 * child process (fork, dlopen, read the descriptor, send a deep copy back), so
 * a plugin whose constructor crashes or hangs is refused without touching the
 * agent. The copy (pp_plugin_info.desc) has owned strings and NULL function
 * pointers: it is what the core uses for config validation, target matching
 * and `polyprof plugins`.
 *
 * Workers: by default each enabled plugin runs in its own process (fork, then
 * exec of the small polyprof-worker executable, which dlopens the plugin)
 * and talks to the core over a socketpair with the length-prefixed binary
 * protocol of ipc.h; INIT carries the plugin's path and configuration. In
 * inline mode the same worker loop runs in a thread of the agent. Either way
 * the core sees the same API.
 *
 * Failure model: a worker that dies, does not answer within the timeout, or
 * grows past its RSS cap is killed; the call that noticed returns a negative
 * code with a human reason ("crashed with SIGSEGV", "did not answer within
 * 10 s", "exceeded its memory limit of 256 MiB"); the worker is restarted
 * with exponential backoff (1 s doubling up to the configured maximum) by
 * pp_worker_service(), replaying init, start and the current target set.
 * Except when init() or start() fails with PP_PERMANENT(): then the worker
 * is off (logged once) until it is freed, i.e. until a configuration reload.
 */
#ifndef PP_SUPERVISOR_H
#define PP_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "polyprof/plugin.h"
#include "profile.h"

struct pp_plugin_info {
  char *path;            /* absolute path of the .so */
  struct pp_plugin desc; /* deep copy; valid only if error == NULL */
  char *error;           /* why it was refused (ABI mismatch, no entry symbol...) */
};

/* Probe every *.so in `dir` (sorted by file name). Refused plugins are kept
 * in the list with `error` set (and logged once at warning). Duplicate names:
 * the first wins, the others are refused. 0 or -errno if dir is unreadable. */
int pp_registry_scan(const char *dir, struct pp_plugin_info **out, size_t *count);
void pp_registry_free(struct pp_plugin_info *infos, size_t count);

struct pp_worker_opts {
  bool inline_mode;    /* thread in the agent instead of a process */
  int memory_limit_mb; /* RSS cap of the worker process, 0 = none */
  int timeout_s;       /* max wait for any reply */
  int backoff_max_s;   /* restart backoff cap */
  /* The worker executable; NULL or "": found next to the agent's own
   * (worker_exe.h). Not used inline. */
  const char *worker_path;
};

struct pp_worker;

/* `pcfg` gives the plugin's bound option values (served to config_*()). */
struct pp_worker *pp_worker_new(const struct pp_plugin_info *info,
                                const struct pp_plugin_config *pcfg,
                                const struct pp_worker_opts *opts);
void pp_worker_free(struct pp_worker *w); /* stops and reaps it */

const char *pp_worker_name(const struct pp_worker *w);
bool pp_worker_running(const struct pp_worker *w);
pid_t pp_worker_pid(const struct pp_worker *w); /* 0 inline or not running */

/* Spawn (if needed), init and start. The session is remembered for restarts. */
int pp_worker_start(struct pp_worker *w, const struct pp_session *session, char *err,
                    size_t errlen);
/* Targets are remembered for restarts. Sent without waiting for the
 * plugin's answer (a plugin may attach inside add_targets for seconds, and
 * the core must keep announcing new processes to the others meanwhile);
 * a failure the plugin answers later is logged when it arrives. Waits
 * only when the worker's request queue is full. */
int pp_worker_add_targets(struct pp_worker *w, const struct pp_target *t, size_t n, char *err,
                          size_t errlen);

/* Snapshot in two halves so all workers collect in parallel: begin() sends
 * the request, end() waits (until the worker's timeout after begin) and
 * decodes its profile into `out` (which it clears first). */
int pp_worker_snapshot_begin(struct pp_worker *w, char *err, size_t errlen);
int pp_worker_snapshot_end(struct pp_worker *w, struct pp_profile *out, char *err, size_t errlen);
/* `polyprof dump`: the plugin's dump() instead of snapshot(), each stack
 * under a "[tid N]" root frame; collected with pp_worker_snapshot_end()
 * (-ENOTSUP: the plugin has no dump()). */
int pp_worker_dump_begin(struct pp_worker *w, char *err, size_t errlen);

/* stop() then fini(); the worker process exits. */
int pp_worker_stop(struct pp_worker *w);

/* Housekeeping between requests: drain log messages, reap a dead worker,
 * enforce the RSS cap, restart after backoff. Call at least once a second. */
void pp_worker_service(struct pp_worker *w);
/* fd to poll for input (logs, death) or -1. */
int pp_worker_fd(const struct pp_worker *w);

/* Restarts and failures so far, for the session log. */
unsigned pp_worker_restarts(const struct pp_worker *w);

/* init() or start() failed with PP_PERMANENT(): the worker is not restarted
 * and every request answers with that code and the reason. */
bool pp_worker_off(const struct pp_worker *w);

#endif
