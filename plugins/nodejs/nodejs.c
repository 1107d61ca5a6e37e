/*
 * polyprof nodejs plugin: JavaScript frames of running Node.js processes,
 * without restarting them.
 *
 * Modes (nodejs.mode / --nodejs-mode, off by default as in gProfiler):
 *  - inspector:   open the inspector (SIGUSR1), run V8's sampling profiler
 *                 over CDP, one cpuprofile per session -> JS stacks. Works
 *                 without perf.
 *  - attach-maps: make the process write /tmp/perf-<pid>.map so the perf
 *                 plugin names JIT frames (perfmap.c).
 *  - perf:        rely on --perf-basic-prof / --perf-prof set by the user.
 *
 * This file holds the descriptor, the options and the vtable; the attach
 * state machine is in inspector.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodejs.h"

static const char *const mode_choices[] = {"inspector", "attach-maps", "perf", NULL};
static const char *const exe_patterns[] = {"node", "nodejs", "node[0-9]*", NULL};
static const char *const map_patterns[] = {"libnode.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "disabled",
     .choices = mode_choices,
     .help = "inspector (V8 profiler over the inspector, perf-less), attach-maps (perf map for "
             "the perf plugin), perf (perf maps / jitdumps of processes started with "
             "--perf-basic-prof / --perf-prof), or disabled"},
    {.key = "attach_timeout_s",
     .type = PP_OPT_INT,
     .default_value = "5",
     .min = 1,
     .max = 60,
     .help = "how long to wait for the inspector to listen after SIGUSR1"},
    {.key = "command_timeout_ms",
     .type = PP_OPT_INT,
     .default_value = "3000",
     .min = 100,
     .max = 8000,
     .help = "deadline of each inspector request (connect, evaluate, profile)"},
    {.key = "max_profile_mb",
     .type = PP_OPT_INT,
     .default_value = "32",
     .min = 1,
     .max = 200,
     .help = "largest cpuprofile message accepted from a target"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "512",
     .min = 1,
     .max = 4096,
     .help = "JS frames kept per stack (leaf side)"},
    {.key = "max_targets",
     .type = PP_OPT_INT,
     .default_value = "64",
     .min = 1,
     .max = 4096,
     .help = "Node.js processes handled at once; more are ignored"},
    {.key = "retry_s",
     .type = PP_OPT_INT,
     .default_value = "60",
     .min = 1,
     .max = 86400,
     .help = "wait before retrying a process whose attach failed"},
    {.key = "include_idle",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "keep V8's (idle) samples (the main thread waiting in the event loop)"},
    {.key = "move_port",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "move an inspector we opened off port 9229 to a random loopback port, so every "
             "Node process of a network namespace can be profiled"},
    {.key = "perfmap_addon",
     .type = PP_OPT_STRING,
     .default_value = NULL,
     .help = "attach-maps: path of nodejs-perfmap.node (default: next to the plugin)"},
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void);

static int nodejs_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct nodejs_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->attach_timeout_s = 5;
  st->command_timeout_ms = 3000;
  st->max_profile_mb = 32;
  st->max_depth = 512;
  st->max_targets = 64;
  st->retry_s = 60;
  host->config_int(host, "attach_timeout_s", &st->attach_timeout_s);
  host->config_int(host, "command_timeout_ms", &st->command_timeout_ms);
  host->config_int(host, "max_profile_mb", &st->max_profile_mb);
  host->config_int(host, "max_depth", &st->max_depth);
  host->config_int(host, "max_targets", &st->max_targets);
  host->config_int(host, "retry_s", &st->retry_s);
  host->config_bool(host, "include_idle", &st->include_idle);
  st->move_port = 1;
  host->config_bool(host, "move_port", &st->move_port);
  const char *addon = NULL;
  if (host->config_string(host, "perfmap_addon", &addon) == 0 && addon && *addon) {
    snprintf(st->addon_path, sizeof(st->addon_path), "%s", addon);
  } else {
    Dl_info di;
    if (dladdr((void *)polyprof_plugin_entry, &di) && di.dli_fname) {
      const char *slash = strrchr(di.dli_fname, '/');
      int dl = slash ? (int)(slash - di.dli_fname) : 1;
      snprintf(st->addon_path, sizeof(st->addon_path), "%.*s/nodejs-perfmap.node", dl,
               slash ? di.dli_fname : ".");
    }
  }
  *out = st;
  return 0;
}

static int nodejs_start(void *state, struct pp_session *session) {
  struct nodejs_state *st = state;
  const char *m = session->mode ? session->mode : "inspector";
  st->mode = strcmp(m, "attach-maps") == 0 ? NODEJS_ATTACH_MAPS
             : strcmp(m, "perf") == 0      ? NODEJS_PERF
                                           : NODEJS_INSPECTOR;
  uint32_t hz = session->frequency_hz ? session->frequency_hz : 11;
  st->interval_us = 1000000u / hz;
  if (st->interval_us < 100) st->interval_us = 100;
  /* attach progress is polled; sampling itself happens inside the target */
  session->tick_interval_ns = 100000000ull;
  NODEJS_LOG(st, PP_LOG_INFO, "mode %s, V8 sampling interval %u us", m, st->interval_us);
  return 0;
}

static void reset_target(struct nodejs_target *t, uint32_t pid, uint64_t start_time) {
  memset(t, 0, sizeof(*t));
  t->pid = pid;
  t->start_time = start_time;
  t->cdp.ws.fd = -1;
  t->state = T_NEW;
}

static int nodejs_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct nodejs_state *st = state;
  for (size_t i = 0; i < n; i++) {
    size_t j;
    for (j = 0; j < st->n; j++)
      if (st->t[j].pid == tg[i].pid) break;
    if (j < st->n) {
      if (st->t[j].start_time == tg[i].start_time) continue;
      /* pid reused: the old process is gone, drop its connection */
      nodejs_ws_close(&st->t[j].cdp.ws, 0);
    } else {
      if (st->n >= (size_t)st->max_targets) {
        NODEJS_LOG(st, PP_LOG_WARNING, "pid %u ignored: max_targets (%lld) reached", tg[i].pid,
                   (long long)st->max_targets);
        continue;
      }
      if (st->n == st->cap) {
        size_t ncap = st->cap ? st->cap * 2 : 16;
        struct nodejs_target *g = realloc(st->t, ncap * sizeof(*g));
        if (!g) return -ENOMEM;
        st->t = g;
        st->cap = ncap;
      }
      j = st->n++;
    }
    reset_target(&st->t[j], tg[i].pid, tg[i].start_time);
  }
  return 0;
}

static int nodejs_tick(void *state, uint64_t now_ns) {
  struct nodejs_state *st = state;
  /* attach work is bounded per tick so the worker stays responsive */
  uint64_t budget = nodejs_now_ns() + 3000000000ull;
  for (size_t i = 0; i < st->n && nodejs_now_ns() < budget; i++) {
    nodejs_step(st, &st->t[i]);
    nodejs_watch_exit(st, &st->t[i]);
  }
  return 0;
}

static void report_target(struct nodejs_state *st, struct nodejs_target *t, struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  if (t->version[0]) {
    char meta[96];
    snprintf(meta, sizeof(meta), "{\"node_version\": \"%s\"}", t->version);
    h->set_app_metadata(sink, t->pid, meta);
  }
  if (t->state == T_FAILED && t->reason[0])
    h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->reason);
  if (t->state == T_IGNORED && t->reason[0] && st->mode != NODEJS_PERF)
    h->set_pid_status(sink, t->pid, PP_PID_SKIPPED, t->reason);
  /* the core's appid rule knows *.js scripts only; ES modules are *.mjs */
  if (t->state == T_LIVE || t->state == T_MAPS) {
    char appid[600];
    if (nodejs_appid(t->pid, appid, sizeof(appid)) == 0 && !strstr(appid, ".js ("))
      h->set_appid(sink, t->pid, appid);
  }
}

static int nodejs_snapshot(void *state, struct pp_sink *sink) {
  struct nodejs_state *st = state;
  const struct pp_host *h = st->host;
  /* stay well inside the host's request timeout (plugins.timeout_s) */
  uint64_t budget = nodejs_now_ns() + 7000000000ull;
  uint64_t samples_before = 0;
  for (size_t i = 0; i < st->n; i++) {
    struct nodejs_target *t = &st->t[i];
    if (t->state == T_LIVE) {
      uint64_t now = nodejs_now_ns();
      if (now >= budget) continue; /* it keeps profiling: the next snapshot gets it */
      uint64_t dl = now + 2 * (uint64_t)st->command_timeout_ms * 1000000ull;
      nodejs_snapshot_target(st, t, sink, dl < budget ? dl : budget);
    } else if (t->state == T_ENDED) {
      report_target(st, t, sink);
      nodejs_emit_final(st, t, sink);
    } else if ((t->state == T_MAPS || t->state == T_FAILED) && !nodejs_alive(st, t)) {
      t->state = T_GONE;
      st->exited++;
    }
    if (t->state != T_GONE) report_target(st, t, sink);
  }
  (void)samples_before;
  size_t w = 0;
  for (size_t i = 0; i < st->n; i++)
    if (st->t[i].state != T_GONE) st->t[w++] = st->t[i];
  st->n = w;
  h->add_counter(sink, "attach_failures", st->attach_failures);
  h->add_counter(sink, "targets_exited", st->exited);
  h->add_counter(sink, "dropped_samples", st->dropped);
  h->add_counter(sink, "truncated_stacks", st->truncated);
  st->attach_failures = st->exited = st->dropped = st->truncated = 0;
  return 0;
}

static int nodejs_stop(void *state) {
  struct nodejs_state *st = state;
  for (size_t i = 0; i < st->n; i++) {
    nodejs_detach(st, &st->t[i]);
    st->t[i].state = T_GONE;
  }
  st->n = 0;
  return 0;
}

static void nodejs_fini(void *state) {
  struct nodejs_state *st = state;
  if (!st) return;
  for (size_t i = 0; i < st->n; i++)
    nodejs_ws_close(&st->t[i].cdp.ws, 0);
  free(st->t);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "nodejs",
    .version = "0.1.0",
    .description = "JavaScript stacks of running Node.js processes (inspector / perf maps)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_ROOT | PP_CAP_NEEDS_PTRACE |
                    PP_CAP_NEEDS_KILL,
    .match_exe = exe_patterns,
    .match_maps = map_patterns,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = nodejs_init,
    .start = nodejs_start,
    .add_targets = nodejs_add_targets,
    .tick = nodejs_tick,
    .snapshot = nodejs_snapshot,
    .stop = nodejs_stop,
    .fini = nodejs_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
