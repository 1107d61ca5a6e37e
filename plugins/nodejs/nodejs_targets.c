/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The nodejs plugin's targets in the kit's target table.
 *
 * attach() identifies Node and starts the mode's work: SIGUSR1, then a
 * tick finds the new inspector and installs the helper through it
 * (inspector.c). A target whose helper is lost later (it ended, the
 * inspector never came up, a request failed) goes back to the table as
 * pending with its reason, retried after retry_s. release() ends what we
 * started in a live process (the helper undoes its work, an inspector we
 * opened is closed); for a process that is gone or exec'd it only closes
 * our side.
 *
 * A target that used CPU during a session but whose profile held no JS
 * sample is reported with an error status, never left silently empty.
 *
 * Stacks of every target go to one stack table, emitted at the snapshot:
 * a profile taken when a program wanted to exit is kept there even when its
 * process is gone by then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuprofile.h"
#include "nodejs.h"
#include "polyprof/kit/json.h"
#include "polyprof/kit/proc.h"

#define MS 1000000ull

static int target_attach(void *plugin, struct pp_target_entry *e) {
  struct nodejs_state *st = plugin;
  struct nodejs_target *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->pid = e->pid;
  t->start_time = e->start_time;
  t->cdp.ws.fd = -1;
  nodejs_chan_init(&t->chan, 0);
  t->state = T_FAILED; /* nothing to undo until the attach got somewhere */
  /* failed before (not merely "still starting"): logged then */
  t->quiet = e->last_error != 0 && e->last_error != -EAGAIN;
  e->data = t;
  int rc = nodejs_begin_attach(st, e, t);
  if (rc < 0 && t->reason[0] && !e->reason[0])
    snprintf(e->reason, sizeof(e->reason), "%.*s", (int)sizeof(e->reason) - 1, t->reason);
  return rc;
}

static void target_release(void *plugin, struct pp_target_entry *e) {
  struct nodejs_state *st = plugin;
  struct nodejs_target *t = e->data;
  if (!t) return;
  uint64_t exe_id = pp_proc_exe_id(e->pid);
  bool same_image = nodejs_alive(st, t) && (!exe_id || !e->exe_id || exe_id == e->exe_id);
  if (!same_image) {
    /* exited, or exec'd into another program that must not be signalled
     * or spoken to: only our side is closed */
    nodejs_forget_inspector(st, t);
    st->exited++;
  } else if (t->state == T_FAILED || t->state == T_GONE || t->state == T_ENDED) {
    nodejs_ws_close(&t->cdp.ws, 1);
    nodejs_chan_close(&t->chan);
  } else {
    nodejs_detach(st, t);
  }
  nodejs_guard_release(st, t);
  free(t);
  e->data = NULL;
}

struct pp_target_table *nodejs_targets_new(struct nodejs_state *st) {
  static const struct pp_target_ops ops = {.attach = target_attach, .release = target_release};
  struct pp_target_table_config cfg = {
      .max_targets = (size_t)st->max_targets,
      .retry_attempts = NODEJS_ATTACH_ATTEMPTS,
      .retry_max_ns = (uint64_t)st->retry_s * 1000 * MS,
  };
  return pp_target_table_new(st->host, &ops, st, &cfg);
}

/* Applies the outcome of a step: lost -> pending (retried after retry_s,
 * its reason as status meanwhile), exited -> gone. */
static void settle(struct nodejs_state *st, struct pp_target_entry *e) {
  struct nodejs_target *t = e->data;
  if (!t) return;
  if (t->state == T_GONE) {
    pp_target_table_gone(st->tt, e);
  } else if (t->state == T_FAILED) {
    snprintf(e->reason, sizeof(e->reason), "%.*s", (int)sizeof(e->reason) - 1, t->reason);
    pp_target_table_retry(st->tt, e, -EIO, (uint64_t)st->retry_s * 1000 * MS);
  }
}

/* CPU time the process's main thread has run (schedstat, ns), or 0. */
static uint64_t main_thread_cpu_ns(uint32_t pid) {
  char path[64], buf[128];
  size_t len = 0;
  snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", pid, pid);
  if (pp_read_file(path, buf, sizeof(buf), &len) < 0) return 0;
  buf[len < sizeof(buf) ? len : sizeof(buf) - 1] = '\0';
  return strtoull(buf, NULL, 10);
}

void nodejs_targets_tick(struct nodejs_state *st, uint64_t budget_ns) {
  pp_target_table_poll(st->tt, pp_clock_ns());
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_ATTACHED) {
    if (pp_clock_ns() >= budget_ns) break;
    struct nodejs_target *t = e->data;
    nodejs_step(st, t);
    if (t->state == T_LIVE && !t->cpu_ns) t->cpu_ns = main_thread_cpu_ns(t->pid);
    settle(st, e);
  }
}

struct collect_ctx {
  struct pp_stack_table *stacks;
  uint32_t pid;
};

static void add_stack(void *ctx, const struct pp_frame *frames, uint32_t n, uint64_t count) {
  const struct collect_ctx *c = ctx;
  /* V8 samples the JS main thread: reported as the process's */
  pp_stack_table_add(c->stacks, c->pid, c->pid, NULL, frames, n, count);
}

void nodejs_collect(struct nodejs_state *st, struct nodejs_target *t, const json_t *profile) {
  struct nodejs_collapse_opts o = {.max_depth = (uint32_t)st->max_depth,
                                   .max_nodes = 4u << 20,
                                   .include_idle = st->include_idle};
  struct nodejs_collapse_stats cs;
  struct collect_ctx c = {.stacks = st->stacks, .pid = t->pid};
  char err[200] = "";
  int rc = nodejs_cpuprofile_collapse(profile, &o, add_stack, &c, &cs, err, sizeof(err));
  st->dropped += cs.dropped;
  st->truncated += cs.truncated;
  t->session_samples += cs.samples;
  if (rc < 0) {
    t->bad_profile = 1;
    snprintf(t->bad_reason, sizeof(t->bad_reason), "%s", err);
  }
}

/* After a snapshot of a live target: a main thread that ran for several
 * sampling intervals must have given samples. */
static void check_samples(struct nodejs_state *st, struct nodejs_target *t) {
  uint64_t cpu = main_thread_cpu_ns(t->pid);
  uint64_t ran = cpu > t->cpu_ns && t->cpu_ns ? cpu - t->cpu_ns : 0;
  uint64_t enough = 10ull * st->interval_us * 1000;
  if (enough < 100 * MS) enough = 100 * MS;
  if (t->cpu_ns && ran >= enough && t->session_samples == 0) {
    t->no_samples = 1;
    snprintf(t->bad_reason, sizeof(t->bad_reason),
             "nodejs: its main thread ran %.1f s of CPU but V8's profiler recorded no JS sample",
             (double)ran / 1e9);
    PP_LOG(st->host, PP_LOG_WARNING, "pid %u: %s", t->pid, t->bad_reason);
  }
  t->cpu_ns = cpu;
  t->session_samples = 0;
}

/* Application metadata and appid of a profiled target. */
static void report_target(struct nodejs_state *st, struct nodejs_target *t, struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  if (t->version[0]) {
    char meta[128], ver[96];
    pp_json_string(ver, sizeof(ver), t->version);
    snprintf(meta, sizeof(meta), "{\"node_version\": %s}", ver);
    h->set_app_metadata(sink, t->pid, meta);
  }
  if (t->bad_profile || t->no_samples) {
    h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->bad_reason);
    t->bad_profile = t->no_samples = 0;
  }
  /* the core's appid rule knows *.js scripts only; ES modules are *.mjs */
  if (t->state == T_LIVE || t->state == T_MAPS) {
    char appid[600];
    if (nodejs_appid(t->pid, appid, sizeof(appid)) == 0 && !strstr(appid, ".js ("))
      h->set_appid(sink, t->pid, appid);
  }
}

void nodejs_targets_snapshot(struct nodejs_state *st, struct pp_sink *sink, uint64_t budget_ns) {
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_ATTACHED) {
    struct nodejs_target *t = e->data;
    if (t->state == T_LIVE) {
      uint64_t now = pp_clock_ns();
      if (now >= budget_ns) continue; /* it keeps profiling: the next snapshot gets it */
      uint64_t dl = now + 2 * (uint64_t)st->command_timeout_ms * MS;
      if (nodejs_snapshot_target(st, t, dl < budget_ns ? dl : budget_ns) == 0 && t->state == T_LIVE)
        check_samples(st, t);
    }
    report_target(st, t, sink);
    settle(st, e);
  }
  pp_stack_table_emit(st->stacks, st->host, sink);
  pp_target_table_report(st->tt, sink);
}
