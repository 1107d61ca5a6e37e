/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof nodejs plugin: JavaScript frames of running Node.js processes,
 * without restarting them.
 *
 * Modes (nodejs.mode / --nodejs-mode; v8 by default):
 *  - inspector:   open the inspector (SIGUSR1) for one request that starts
 *                 a helper thread in the process and closes it again; the
 *                 helper runs V8's sampling profiler, one cpuprofile per
 *                 session -> JS stacks (inspector.c, helper.c). Works
 *                 without perf.
 *  - attach-maps: make the process write /tmp/perf-<pid>.map so the perf
 *                 plugin names JIT frames (attach_maps.c).
 *  - perf:        rely on --perf-basic-prof / --perf-prof set by the user.
 *  - v8:          read JS stacks from outside the process: perf samples of
 *                 registers and stack, V8's own metadata, heap reads
 *                 (v8_mode.c). Nothing is signalled or loaded.
 *
 * This file holds the descriptor, the options and the vtable; nodejs.h maps
 * the other files.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodejs.h"
#include "polyprof/kit/options.h"

static const char *const mode_choices[] = {"inspector", "attach-maps", "perf", "v8", NULL};
static const char *const exe_patterns[] = {"node", "nodejs", "node[0-9]*", NULL};
static const char *const map_patterns[] = {"libnode.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "v8",
     .choices = mode_choices,
     .help = "inspector (V8 profiler over the inspector, perf-less), attach-maps (perf map for "
             "the perf plugin), perf (perf maps / jitdumps of processes started with "
             "--perf-basic-prof / --perf-prof), v8 (stacks read from outside the process, "
             "nothing attached), or disabled"},
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
     .help = "Node.js processes handled at once; more are skipped"},
    {.key = "retry_s",
     .type = PP_OPT_INT,
     .default_value = "60",
     .min = 1,
     .max = 86400,
     .help = "wait before retrying a process whose attach failed"},
    {.key = "include_idle",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "wall: keep V8's (idle) samples (inspector mode), or sample threads off their "
             "CPU too (v8 mode: the event loop waiting is (idle)); --mode wall sets it"},
    {.key = "perfmap_addon",
     .type = PP_OPT_STRING,
     .default_value = NULL,
     .help = "attach-maps: path of nodejs-perfmap.node (default: next to the plugin)"},
    {.key = "stack_kb",
     .type = PP_OPT_INT,
     .default_value = "24",
     .min = 4,
     .max = 60,
     .help = "v8 mode: KiB of each thread's stack the kernel copies per sample (deeper JS "
             "frames are cut)"},
    {.key = "function_cache",
     .type = PP_OPT_INT,
     .default_value = "1024",
     .min = 16,
     .max = 65536,
     .help = "v8 mode: functions (name, script, line) remembered per process"},
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void);

static void nodejs_fini(void *state);

static int nodejs_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct nodejs_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->attach_timeout_s = pp_opt_int(host, PP_OPTIONS(options), "attach_timeout_s");
  st->command_timeout_ms = pp_opt_int(host, PP_OPTIONS(options), "command_timeout_ms");
  st->max_profile_mb = pp_opt_int(host, PP_OPTIONS(options), "max_profile_mb");
  st->max_depth = pp_opt_int(host, PP_OPTIONS(options), "max_depth");
  st->max_targets = pp_opt_int(host, PP_OPTIONS(options), "max_targets");
  st->retry_s = pp_opt_int(host, PP_OPTIONS(options), "retry_s");
  st->include_idle = pp_opt_bool(host, PP_OPTIONS(options), "include_idle");
  st->v8_stack_kb = pp_opt_int(host, PP_OPTIONS(options), "stack_kb");
  st->v8_functions = pp_opt_int(host, PP_OPTIONS(options), "function_cache");
  const char *addon = pp_opt_string(host, PP_OPTIONS(options), "perfmap_addon");
  if (addon && *addon) {
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
  /* the stack table keeps what the profiles keep: max_depth frames */
  struct pp_stack_table_limits lim = {.max_depth = (uint32_t)st->max_depth};
  st->stacks = pp_stack_table_new(&lim);
  st->tt = nodejs_targets_new(st);
  if (!st->stacks || !st->tt) {
    nodejs_fini(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int nodejs_start(void *state, struct pp_session *session) {
  struct nodejs_state *st = state;
  const char *m = session->mode ? session->mode : "inspector";
  st->mode = strcmp(m, "attach-maps") == 0 ? NODEJS_ATTACH_MAPS
             : strcmp(m, "perf") == 0      ? NODEJS_PERF
             : strcmp(m, "v8") == 0        ? NODEJS_V8
                                           : NODEJS_INSPECTOR;
  uint32_t hz = session->frequency_hz ? session->frequency_hz : 11;
  if (st->mode == NODEJS_V8) {
    struct nodejs_v8_config c = {.hz = hz,
                                 .stack_bytes = (uint32_t)st->v8_stack_kb * 1024,
                                 .cache_entries = (uint32_t)st->v8_functions,
                                 .max_threads = 64,
                                 .max_depth = (uint32_t)st->max_depth,
                                 .max_targets = (size_t)st->max_targets,
                                 .retry_ns = (uint64_t)st->retry_s * 1000000000ull,
                                 .wall = st->include_idle,
                                 .offcpu = (session->flags & PP_SESSION_OFFCPU) != 0};
    nodejs_v8_free(st->v8);
    st->v8 = nodejs_v8_new(st->host, &c);
    if (!st->v8) return -ENOMEM;
    session->tick_interval_ns = nodejs_v8_tick_ns(hz);
    /* a context-switch ring holds eight switches: drained often */
    if (c.wall || c.offcpu) session->tick_interval_ns = 10000000ull;
    PP_INFO(st->host, "mode v8, %u Hz, %lld KiB of stack per sample%s%s", hz,
            (long long)st->v8_stack_kb, c.wall ? ", threads off their CPU too (wall)" : "",
            c.offcpu ? ", blocked threads as off-CPU time" : "");
    return 0;
  }
  st->interval_us = 1000000u / hz;
  if (st->interval_us < 100) st->interval_us = 100;
  /* attach progress is polled; sampling itself happens inside the target */
  session->tick_interval_ns = 100000000ull;
  PP_INFO(st->host, "mode %s, V8 sampling interval %u us", m, st->interval_us);
  return 0;
}

static int nodejs_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct nodejs_state *st = state;
  if (st->mode == NODEJS_V8) return nodejs_v8_add(st->v8, tg, n);
  return pp_target_table_add(st->tt, tg, n);
}

static int nodejs_tick(void *state, uint64_t now_ns) {
  struct nodejs_state *st = state;
  if (st->mode == NODEJS_V8) {
    nodejs_v8_tick(st->v8);
    return 0;
  }
  /* attach work is bounded per tick so the worker stays responsive */
  nodejs_targets_tick(st, pp_clock_ns() + 3000000000ull);
  return 0;
}

/* v8 mode only: the inspector modes sample inside the process, on its
 * own schedule, with nothing to read from outside at once (-ENOTSUP: the
 * dump takes their session, as for a plugin without dump()) */
static int nodejs_dump(void *state, struct pp_sink *sink) {
  struct nodejs_state *st = state;
  return st->mode == NODEJS_V8 ? nodejs_v8_dump(st->v8, sink) : -ENOTSUP;
}

static int nodejs_snapshot(void *state, struct pp_sink *sink) {
  struct nodejs_state *st = state;
  const struct pp_host *h = st->host;
  if (st->mode == NODEJS_V8) {
    nodejs_v8_snapshot(st->v8, sink);
    return 0;
  }
  /* stay well inside the host's request timeout (plugins.timeout_s) */
  nodejs_targets_snapshot(st, sink, pp_clock_ns() + 7000000000ull);
  h->add_counter(sink, "attach_failures", st->attach_failures);
  h->add_counter(sink, "targets_exited", st->exited);
  h->add_counter(sink, "dropped_samples", st->dropped);
  h->add_counter(sink, "truncated_stacks", st->truncated);
  st->attach_failures = st->exited = st->dropped = st->truncated = 0;
  return 0;
}

/* Ends the work in every target (inspectors we opened are closed, perf
 * maps stopped); the next start() re-announces the processes afresh. */
static int nodejs_stop(void *state) {
  struct nodejs_state *st = state;
  pp_target_table_free(st->tt);
  pp_stack_table_clear(st->stacks);
  nodejs_v8_free(st->v8);
  st->v8 = NULL;
  st->tt = nodejs_targets_new(st);
  return st->tt ? 0 : -ENOMEM;
}

static void nodejs_fini(void *state) {
  struct nodejs_state *st = state;
  if (!st) return;
  pp_target_table_free(st->tt);
  pp_stack_table_free(st->stacks);
  nodejs_v8_free(st->v8);
  nodejs_guard_free(st->guard);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "nodejs",
    .version = "0.1.0",
    .description = "JavaScript stacks of running Node.js processes (inspector / perf maps)",
    /* Every privilege but reading is a step: FILE_OVERRIDE around the
     * connect to the socket a target's helper creates owner-only in the
     * target's /tmp and around the addon copy into it, KILL around the
     * SIGUSR1, NSENTER (CAP_SYS_ADMIN) around setns() and the attach
     * guard's bpf() calls. */
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER |
                    PP_CAP_NEEDS_PTRACE | PP_CAP_NEEDS_KILL | PP_CAP_STEP_KILL |
                    PP_CAP_NEEDS_PERFMON | PP_CAP_NEEDS_FILE_OVERRIDE | PP_CAP_STEP_FILE_OVERRIDE,
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
    .dump = nodejs_dump,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
