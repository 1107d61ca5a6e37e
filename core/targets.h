/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Target discovery: one /proc scan per tick (or, with the kernel's process
 * events, an update from the processes born, exec'd and gone), matched against every runtime
 * plugin's declarative patterns (exe basename, mapped-file basenames), so each
 * plugin is handed only its pids and no plugin walks /proc itself.
 *
 * Processes are keyed by (pid, start time): a reused pid is a new process.
 * A process's maps are read when it is first seen and re-read at session
 * boundaries (pp_targets_scan with recheck), which catches runtimes loaded
 * later (embedded interpreters, late dlopen) without reading every process's
 * maps every second.
 *
 * A runtime maps its library some milliseconds after exec (a JVM's launcher
 * loads libjvm.so, a dotnet host libcoreclr.so once it has resolved the
 * framework), so a process first seen right after exec usually matches
 * nothing yet. Processes younger than PP_TARGETS_YOUNG_MS (by start time,
 * or since their exec) that match nothing are looked at again much more
 * often than the scan runs (pp_targets_recheck_young), so a short build
 * step or cron job is handed to its plugin from its first moments.
 */
#ifndef PP_TARGETS_H
#define PP_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "polyprof/plugin.h"

#define PP_TARGETS_MAX_PLUGINS 64
/* How long after its start (or exec) an unmatched process is young. */
#define PP_TARGETS_YOUNG_MS 2000
/* How often the caller should call pp_targets_recheck_young while there
 * are young processes: a runtime reaches its plugin within about this much
 * of its library being mapped. */
#define PP_TARGETS_YOUNG_TICK_MS 100
/* Processes re-read per pp_targets_recheck_young call (round robin beyond):
 * a fork storm costs a bounded number of /proc reads per tick. */
#define PP_TARGETS_YOUNG_BUDGET 16

struct pp_targets;

/* descs[i] == NULL or a system-wide plugin: never matched. */
struct pp_targets *pp_targets_new(const struct pp_plugin *const *descs, size_t n);
void pp_targets_free(struct pp_targets *t);

/* Restrict to these pids (--pids); n == 0: all processes. */
void pp_targets_set_filter(struct pp_targets *t, const uint32_t *pids, size_t n);
/* Never match these (the agent and its workers). Replaces the previous set. */
void pp_targets_set_excluded(struct pp_targets *t, const pid_t *pids, size_t n);

typedef void (*pp_target_cb)(void *ctx, size_t plugin, const struct pp_target *target);

/* Called for every process the scan looks at closely, matched or not: when
 * it is first seen and at each re-classification (which follows an exec),
 * so what it is can be remembered while it is alive. NULL: none. */
typedef void (*pp_process_cb)(void *ctx, uint32_t pid, uint64_t start_time);
void pp_targets_set_observer(struct pp_targets *t, pp_process_cb cb, void *ctx);

/* Scan /proc. For every (plugin, process) match not reported before, calls
 * on_new. Between scans a known pid is assumed to be the same process (pid
 * reuse within one tick needs a full pid wrap-around); recheck re-reads every
 * start time and executable to be sure (do it at session boundaries): a
 * process that exec'd since is re-classified at once, so a launcher that
 * became a runtime is that runtime's target from the next session on, and
 * on_new is called again for every plugin its new image matches (the same
 * pid and start time: a plugin that had ignored the old image looks again).
 * Unmatched processes are re-classified on their own backoff schedule.
 * Returns the number of processes seen, or -errno. */
int pp_targets_scan(struct pp_targets *t, bool recheck, pp_target_cb on_new, void *ctx);

/* Like a scan without recheck, without listing /proc: the known processes
 * minus gone, plus changed (born or exec'd: their start time and executable
 * are read again, so an exec'd process is re-announced as by a recheck).
 * Both lists sorted ascending (pp_proc_events_take gives them so). */
int pp_targets_update(struct pp_targets *t, const uint32_t *changed, size_t nchanged,
                      const uint32_t *gone, size_t ngone, pp_target_cb on_new, void *ctx);

/* Looks again at the young processes no plugin matched yet whose turn it
 * is, at most PP_TARGETS_YOUNG_BUDGET of them: their size (statm), and when
 * it changed, their executable (an exec'd one is classified afresh, as by an
 * update) and maps; calls on_new for every match found. No /proc listing, no allocation beyond the
 * per-plugin lists' growth. Returns how many young unmatched processes remain: 0 means no need to
 * call it again before the next scan or update. */
size_t pp_targets_recheck_young(struct pp_targets *t, pp_target_cb on_new, void *ctx);

/* Young unmatched processes as of the last scan, update or recheck. */
size_t pp_targets_young(const struct pp_targets *t);

/* Live pids currently matched by `plugin` (valid until the next scan or
 * young recheck). */
size_t pp_targets_of(const struct pp_targets *t, size_t plugin, const struct pp_target **out);

/* Processes matched by any plugin / seen at all in the last scan. */
size_t pp_targets_process_count(const struct pp_targets *t);

/* Pure matching, exposed for tests: does this exe path / maps text match? */
bool pp_targets_match_exe(const char *const *patterns, const char *exe_path);
bool pp_targets_match_maps(const char *const *patterns, const char *maps_text);

#endif
