/*
 * The nodejs plugin's internal header: its state, and what its files share.
 *
 *   nodejs.c          descriptor, options, vtable
 *   nodejs_targets.c  the target table's attach/release, the per-target work
 *                     of tick() and snapshot(), statuses, metadata, stacks
 *   inspector.c       inspector attach state machine and profiling sessions
 *   attach_maps.c     attach-maps mode: the perf-map addon in the target
 *   perfmap_addon.c   that addon (loaded into Node, not into the agent)
 *   nodeproc.c        what /proc says of a Node process (identity, flags,
 *                     listening sockets, appid)
 *   cdp.c, ws.c       Chrome DevTools Protocol over a loopback WebSocket
 *   cpuprofile.c      V8 cpuprofile -> stacks
 *   v8_mode.c         v8 mode: stacks read from outside the process, with
 *                     v8_layout.c (V8's metadata), v8_sample.c (perf
 *                     samples of registers and stack), v8_walk.c (frames),
 *                     v8_heap.c (heap objects)
 */
#ifndef POLYPROF_NODEJS_H
#define POLYPROF_NODEJS_H

#include <stdbool.h>
#include <stdint.h>

#include "cdp.h"
#include "nodeproc.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/stack_table.h"
#include "polyprof/kit/target_table.h"
#include "polyprof/plugin.h"
#include "v8_mode.h"

enum nodejs_mode { NODEJS_INSPECTOR, NODEJS_ATTACH_MAPS, NODEJS_PERF, NODEJS_V8 };

/* Where an attached target is (struct nodejs_target.state). T_FAILED and
 * T_GONE are outcomes of a step, turned into the table's pending (retried
 * after retry_s) and gone by settle() in nodejs_targets.c. */
enum nodejs_tstate {
  T_QUEUED, /* Node; waits for another attach in its network namespace */
  T_WAIT,   /* SIGUSR1 sent (or inspector being moved); waiting for it to listen */
  T_LIVE,   /* inspector session open, profiler running */
  T_MAPS,   /* attach-maps: perf map writer running, inspector closed */
  T_ENDED,  /* wanted to exit: profile kept, session closed */
  T_FAILED, /* lost: reason says why */
  T_GONE,   /* exited */
};

#define NODEJS_MAX_PRE 32
/* attach() calls for one image before a Node that never catches SIGUSR1
 * is given up (and the table's retry_attempts) */
#define NODEJS_ATTACH_ATTEMPTS 12

/* Per-target state (the table entry's data). */
struct nodejs_target {
  uint32_t pid, ns_pid;
  uint64_t start_time;
  int state;        /* enum nodejs_tstate */
  int we_opened;    /* we signalled it: close the inspector again at stop */
  int quiet;        /* an earlier attempt failed and was logged: log the next at debug */
  int perf_prof;    /* started with --perf-basic-prof / --perf-prof */
  int inspect_flag; /* started with --inspect* */
  int maps_on;      /* attach-maps: the addon writes the perf map */
  int moved;        /* the inspector we opened was moved off port 9229 */
  int start_failed; /* its inspector answered, the mode's work did not start */
  int bad_profile;  /* a cpuprofile was refused: bad_reason, at the next snapshot */
  uint64_t netns;   /* inode of its network namespace */
  uint64_t deadline_ns;
  struct nodejs_listener pre[NODEJS_MAX_PRE];
  int npre;
  struct nodejs_cdp cdp;
  char version[32];
  char reason[256];
  char bad_reason[200];
};

struct nodejs_state {
  const struct pp_host *host;
  int mode;
  uint32_t interval_us;
  int64_t attach_timeout_s, command_timeout_ms, max_profile_mb, max_depth, max_targets, retry_s;
  bool include_idle, move_port;
  char addon_path[4096]; /* attach-maps: the perf-map addon next to this .so */
  struct pp_target_table *tt;
  struct pp_stack_table *stacks;     /* JS stacks since the last snapshot */
  int64_t v8_stack_kb, v8_functions; /* v8 mode options */
  struct nodejs_v8 *v8;              /* v8 mode: its targets and stacks */
  /* counters since the last snapshot */
  uint64_t attach_failures, exited, dropped, truncated;
};

/* nodejs_targets.c */
struct pp_target_table *nodejs_targets_new(struct nodejs_state *st);
void nodejs_targets_tick(struct nodejs_state *st, uint64_t budget_ns);
void nodejs_targets_snapshot(struct nodejs_state *st, struct pp_sink *sink, uint64_t budget_ns);
/* Adds a cpuprofile's stacks to the session's stack table; a malformed one
 * is reported at the next snapshot (t->bad_profile). */
void nodejs_collect(struct nodejs_state *st, struct nodejs_target *t, const json_t *profile);

/* inspector.c */
/* attach(): identifies Node, then opens the inspector (SIGUSR1) or joins
 * an open one. 0 (t->state T_QUEUED, T_WAIT, T_LIVE or T_MAPS), PP_ATTACH_*, or a
 * negative errno (reason in t->reason, or none: not yet). */
int nodejs_begin_attach(struct nodejs_state *st, struct pp_target_entry *e,
                        struct nodejs_target *t);
void nodejs_step(struct nodejs_state *st, struct nodejs_target *t);
int nodejs_snapshot_target(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);
void nodejs_detach(struct nodejs_state *st, struct nodejs_target *t);
/* T_LIVE: lets a process that finished go (see inspector.c). */
void nodejs_watch_exit(struct nodejs_state *st, struct nodejs_target *t);
int nodejs_alive(struct nodejs_state *st, const struct nodejs_target *t);
/* The inspector we opened is no longer ours to close (the target is gone). */
void nodejs_forget_inspector(struct nodejs_state *st, struct nodejs_target *t);
/* Synchronous attach for short jobs (attach-maps stop): signal if needed,
 * wait for the inspector until deadline, open and validate a session. */
int nodejs_open_sync(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);
void nodejs_close_session(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);

/* attach_maps.c */
int nodejs_perfmap_start(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);
int nodejs_perfmap_stop(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);

#endif
