/*
 * Shared state of the nodejs plugin (plugin-internal).
 */
#ifndef POLYPROF_NODEJS_H
#define POLYPROF_NODEJS_H

#include <stdint.h>

#include "cdp.h"
#include "nodeproc.h"
#include "polyprof/plugin.h"

enum nodejs_mode { NODEJS_INSPECTOR, NODEJS_ATTACH_MAPS, NODEJS_PERF };

enum nodejs_tstate {
  T_NEW,     /* announced; attach at the next tick (or after retry_at) */
  T_WAIT,    /* SIGUSR1 sent; waiting for the inspector to listen */
  T_LIVE,    /* inspector session open, profiler running */
  T_MAPS,    /* attach-maps: perf map writer running, inspector closed */
  T_FAILED,  /* attach failed; retried at retry_at */
  T_IGNORED, /* not Node (or unsupported): never touched again */
  T_ENDED,   /* wanted to exit: profile kept, session closed; emitted at the next snapshot */
  T_GONE,    /* exited; removed at the next snapshot */
};

#define NODEJS_MAX_PRE 32

struct nodejs_target {
  uint32_t pid, ns_pid;
  uint64_t start_time;
  int state;
  int we_opened; /* we signalled it: close the inspector again at stop */
  int logged;    /* the failure was logged once */
  int perf_prof; /* started with --perf-basic-prof / --perf-prof */
  int maps_on;
  int early_tries; /* attempts while it did not catch SIGUSR1 yet */
  int moved;       /* the inspector we opened was moved off port 9229 */
  uint64_t netns;
  /* inode of its network namespace */ /* attach-maps: our perf-map writer runs in it */
  uint64_t deadline_ns, retry_at_ns;
  struct nodejs_listener pre[NODEJS_MAX_PRE];
  int npre;
  struct nodejs_cdp cdp;
  json_t *final_profile; /* T_ENDED: the profile taken when it wanted to exit */
  char version[32];
  char appid[512];
  char reason[256];
};

struct nodejs_state {
  const struct pp_host *host;
  int mode;
  uint32_t interval_us;
  int64_t attach_timeout_s, command_timeout_ms, max_profile_mb, max_depth, max_targets, retry_s;
  int include_idle, move_port;
  char addon_path[4096]; /* attach-maps: the perf-map addon next to this .so */
  struct nodejs_target *t;
  size_t n, cap;
  /* counters since the last snapshot */
  uint64_t attach_failures, exited, dropped, truncated;
};

#define NODEJS_LOG(st, lvl, ...) (st)->host->log((st)->host, (lvl), __VA_ARGS__)

/* inspector.c */
void nodejs_step(struct nodejs_state *st, struct nodejs_target *t);
int nodejs_snapshot_target(struct nodejs_state *st, struct nodejs_target *t, struct pp_sink *sink,
                           uint64_t deadline_ns);
void nodejs_detach(struct nodejs_state *st, struct nodejs_target *t);
/* T_LIVE: lets a process that finished go (see inspector.c). */
void nodejs_watch_exit(struct nodejs_state *st, struct nodejs_target *t);
/* T_ENDED: emits the kept profile and marks the target gone. */
void nodejs_emit_final(struct nodejs_state *st, struct nodejs_target *t, struct pp_sink *sink);
int nodejs_alive(struct nodejs_state *st, const struct nodejs_target *t);
/* Synchronous attach for short jobs (attach-maps stop): signal if needed,
 * wait for the inspector until deadline, open and validate a session. */
int nodejs_open_sync(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);
void nodejs_close_session(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);

/* perfmap.c (attach-maps) */
int nodejs_perfmap_start(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);
int nodejs_perfmap_stop(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline_ns);

#endif
