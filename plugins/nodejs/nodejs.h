/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The nodejs plugin's internal header: its state, and what its files share.
 *
 *   nodejs.c          descriptor, options, vtable
 *   nodejs_targets.c  the target table's attach/release, the per-target work
 *                     of tick() and snapshot(), statuses, metadata, stacks
 *   inspector.c       attach state machine: the one TCP inspector request
 *                     that installs the helper, then the helper's channel
 *   helper.c          the helper run inside the target (JS), its install
 *   chan.c            the agent's end of the helper's unix socket
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

#include "attach_guard.h"
#include "cdp.h"
#include "chan.h"
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
  T_WAIT,   /* SIGUSR1 sent; waiting for the inspector to listen */
  T_HELLO,  /* helper installed, inspector closed; waiting for its socket */
  T_LIVE,   /* helper running V8's profiler */
  T_MAPS,   /* attach-maps: perf map writer running, helper watching */
  T_ENDED,  /* exited: its last profile kept */
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
  int we_opened;    /* we signalled it: the inspector is ours to close */
  int quiet;        /* an earlier attempt failed and was logged: log the next at debug */
  int perf_prof;    /* started with --perf-basic-prof / --perf-prof */
  int inspect_flag; /* started with --inspect* */
  int maps_on;      /* attach-maps: the addon writes the perf map */
  int start_failed; /* its inspector answered, the mode's work did not start */
  int bad_profile;  /* a cpuprofile was refused: bad_reason, at the next snapshot */
  int no_samples;   /* used CPU but the session's profile had no sample: why in bad_reason */
  uint64_t cpu_ns;  /* main thread's CPU time at the last snapshot */
  uint64_t session_samples; /* JS samples collected since the last snapshot */
  uint64_t netns;           /* inode of its network namespace */
  uint64_t netns_cookie;    /* the same namespace as the attach guard knows it */
  int guarded;              /* the attach guard covers its inspector port */
  int inspect_port;         /* SIGUSR1's port (--inspect-port), 0 default, -1 unknown */
  uint64_t deadline_ns;
  struct nodejs_listener pre[NODEJS_MAX_PRE];
  int npre;
  struct nodejs_cdp cdp;   /* the TCP inspector, during the attach only */
  struct nodejs_chan chan; /* the helper's socket */
  char dir[64];            /* the helper's directory in the target */
  char addon[64];          /* attach-maps: the addon's path in the target */
  char version[32];
  char reason[256];
  char bad_reason[200];
};

struct nodejs_state {
  const struct pp_host *host;
  int mode;
  uint32_t interval_us;
  int64_t attach_timeout_s, command_timeout_ms, max_profile_mb, max_depth, max_targets, retry_s;
  bool include_idle;
  char addon_path[4096]; /* attach-maps: the perf-map addon next to this .so */
  struct pp_target_table *tt;
  struct pp_stack_table *stacks;     /* JS stacks since the last snapshot */
  int64_t v8_stack_kb, v8_functions; /* v8 mode options */
  struct nodejs_v8 *v8;              /* v8 mode: its targets and stacks */
  struct nodejs_guard *guard;        /* inspector modes: the attach guard, once loaded */
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
 * an open one. 0 (t->state T_QUEUED, T_WAIT, T_HELLO...), PP_ATTACH_*, or a
 * negative errno (reason in t->reason, or none: not yet). */
int nodejs_begin_attach(struct nodejs_state *st, struct pp_target_entry *e,
                        struct nodejs_target *t);
/* One tick of attach progress, or of watching a running helper. */
void nodejs_step(struct nodejs_state *st, struct nodejs_target *t);
int nodejs_snapshot_target(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);
/* Ends what we started in a live process: the helper undoes its work,
 * an inspector we opened and did not close yet is closed. */
void nodejs_detach(struct nodejs_state *st, struct nodejs_target *t);
int nodejs_alive(struct nodejs_state *st, const struct nodejs_target *t);
/* The process is gone or exec'd: only our side is closed. */
void nodejs_forget_inspector(struct nodejs_state *st, struct nodejs_target *t);
/* Lifts the attach guard t holds (kept while another target of its network
 * namespace needs it). */
void nodejs_guard_release(struct nodejs_state *st, struct nodejs_target *t);

/* attach_maps.c */
/* Copies the addon into the target (attach-maps); *path gets where the
 * target sees it. 0, or -errno with t->reason set. */
int nodejs_perfmap_prepare(struct nodejs_state *st, struct nodejs_target *t, char *path,
                           size_t cap);
/* Removes the target's perf map once the helper stopped writing it. */
void nodejs_perfmap_remove(struct nodejs_state *st, const struct nodejs_target *t);

#endif
