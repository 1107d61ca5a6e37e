/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof java plugin: Java stacks of every HotSpot JVM on the host.
 *
 * mode agent (default; "ap" is accepted as gProfiler's name for it): each
 * JVM gets our JVMTI agent (agent/, libpolyprof-jvmti.so) through HotSpot's
 * dynamic attach: `load <agent> true start,...` once, `dump,file=...` at
 * every snapshot (the agent writes its stacks into a file in the JVM's /tmp,
 * which we read inside its root), `stop` when the plugin stops; the agent
 * then stays loaded but dormant and is re-armed by the next start.
 *
 * mode perfmap: no agent; `jcmd Compiler.perfmap` (JDK 17+) at every
 * snapshot so the perf plugin can name JIT frames from /tmp/perf-<pid>.map.
 *
 * JVMs are targets of the kit's target table (jvm_lifecycle.c). Attaching
 * can wait seconds for a JVM's attach listener, so it happens from tick()
 * only, one JVM per tick, never from add_targets() or snapshot().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "java.h"

static const char *const modes[] = {"agent", "ap", "perfmap", NULL};
static const char *const maps[] = {"libjvm.so", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .choices = modes,
     .default_value = "agent",
     .help = "agent: our JVMTI sampling agent (ap is an alias); perfmap: only "
             "jcmd Compiler.perfmap for perf (JDK 17+)"},
    {.key = "agent_path",
     .type = PP_OPT_STRING,
     .default_value = "",
     .help = "the agent library; empty: java-agent/libpolyprof-jvmti.so next to the plugin"},
    {.key = "attach_timeout",
     .type = PP_OPT_INT,
     .default_value = "6",
     .min = 1,
     .max = 60,
     .cli_flag = "java-jattach-timeout",
     .help = "seconds to wait for a JVM's attach socket and for each attach reply"},
    {.key = "max_memory_mb",
     .type = PP_OPT_INT,
     .default_value = "24",
     .min = 8,
     .max = 1024,
     .help = "memory cap of the agent inside each JVM (stack store, names, code map)"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "128",
     .min = 1,
     .max = 256,
     .help = "Java frames kept per stack"},
    {.key = "collect_thread_names",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "use Java thread names instead of the process name as the first frame"},
    {.key = "min_age_ms",
     .type = PP_OPT_INT,
     .default_value = "150",
     .min = 0,
     .max = 600000,
     .help = "leave JVMs younger than this alone: the attach would cost them more than their "
             "profile is worth (a JVM still starting is refused on its own: no Signal Dispatcher)"},
    {.key = "collect_metadata",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "report java_version and non-default JVM flags as application metadata"},
    {.key = "alloc_interval",
     .type = PP_OPT_INT,
     .default_value = "524288",
     .min = 1024,
     .max = 1073741824,
     .help = "--mode alloc: sample about every this many bytes a thread allocates (JDK 11+)"},
    {.key = "wall",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .cli_flag = "java-wall",
     .help = "sample every Java thread on wall-clock timers, running or waiting (the wall "
             "profile; --mode wall sets it); false: each thread on its CPU-time timer"},
    {.key = "perfmap_copy_max_mb",
     .type = PP_OPT_INT,
     .default_value = "64",
     .min = 0,
     .max = 4096,
     .help = "perfmap mode: largest perf map copied to the plugin's runtime directory for perf, "
             "for a JVM with a /tmp of its own (0: none copied)"},
};

static int java_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct java_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->attach_timeout_s = pp_opt_int(host, PP_OPTIONS(options), "attach_timeout");
  st->max_memory_mb = pp_opt_int(host, PP_OPTIONS(options), "max_memory_mb");
  st->max_depth = pp_opt_int(host, PP_OPTIONS(options), "max_depth");
  st->alloc_interval = pp_opt_int(host, PP_OPTIONS(options), "alloc_interval");
  st->min_age_ms = pp_opt_int(host, PP_OPTIONS(options), "min_age_ms");
  st->thread_names = pp_opt_bool(host, PP_OPTIONS(options), "collect_thread_names");
  st->collect_metadata = pp_opt_bool(host, PP_OPTIONS(options), "collect_metadata");
  st->wall = pp_opt_bool(host, PP_OPTIONS(options), "wall");
  st->perfmap_copy_max = (size_t)pp_opt_int(host, PP_OPTIONS(options), "perfmap_copy_max_mb") << 20;
  st->agent_path_opt = pp_opt_string(host, PP_OPTIONS(options), "agent_path");
  static const struct pp_target_ops ops = {.attach = java_jvm_attach, .release = java_jvm_release};
  /* exit and exec of an armed JVM are noticed within a second, not only at
   * the snapshot; a JVM still starting up gets ~a minute of retries with
   * backoff, the first at the next tick (which is also when a JVM put off
   * by our one-attach-per-tick pacing is looked at again) */
  const struct pp_target_table_config cfg = {.liveness_ns = 1000000000ull,
                                             .retry_first_ns = 50000000ull};
  st->targets = pp_target_table_new(host, &ops, st, &cfg);
  if (!st->targets) {
    free(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int java_start(void *state, struct pp_session *session) {
  struct java_state *st = state;
  st->perfmap = session->mode && strcmp(session->mode, "perfmap") == 0;
  st->alloc = (session->flags & PP_SESSION_ALLOC) && !st->perfmap ? st->alloc_interval : 0;
  st->offcpu = (session->flags & PP_SESSION_OFFCPU) && !st->perfmap;
  st->frequency = session->frequency_hz ? session->frequency_hz : 11;
  st->duration_s = session->duration_s ? session->duration_s : 60;
  session->tick_interval_ns = 50000000ull; /* attach work only */
  if (!st->perfmap) {
    int rc = java_agent_host_path(st->agent_path_opt, st->agent_host, sizeof(st->agent_host));
    if (rc != 0) {
      PP_ERROR(st->host, "agent library %s not usable: %s", st->agent_host, strerror(-rc));
      return rc;
    }
  }
  PP_INFO(st->host, "java: mode %s, %u Hz%s%s%s%s", st->perfmap ? "perfmap" : "agent",
          st->frequency, st->wall && !st->perfmap ? ", wall-clock timers" : "",
          st->offcpu ? ", blocked threads as off-CPU time" : "", st->perfmap ? "" : ", agent ",
          st->perfmap ? "" : st->agent_host);
  return 0;
}

static int java_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct java_state *st = state;
  return pp_target_table_add(st->targets, t, n);
}

static int java_tick(void *state, uint64_t tick_ns) {
  struct java_state *st = state;
  (void)tick_ns; /* the table's retry times are on pp_clock_ns */
  st->in_tick = 1;
  st->tick_busy = 0;
  pp_target_table_poll(st->targets, pp_clock_ns());
  if (!st->tick_busy) java_jvm_tick_work(st);
  st->in_tick = 0;
  return 0;
}

static int java_snapshot(void *state, struct pp_sink *sink) {
  struct java_state *st = state;
  java_jvm_collect_all(st, sink);
  pp_target_table_report(st->targets, sink);
  st->host->add_counter(sink, "java_exited", st->exited);
  st->exited = 0;
  return 0;
}

static int java_stop(void *state) {
  java_jvm_stop_all(state);
  return 0;
}

static void java_fini(void *state) {
  struct java_state *st = state;
  if (!st) return;
  pp_target_table_free(st->targets); /* releases JVMs: may leave exited ones' stacks */
  java_jvm_free_gone(st);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "java",
    .version = POLYPROF_VERSION,
    .description = "Java stacks of HotSpot JVMs (JVMTI agent over dynamic attach, or perf maps)",
    /* Every privilege but reading is a step. FILE_OVERRIDE: the agent's
     * directory is created in the JVM's /tmp, which in a container may be
     * its user's and not world-writable (raised around that copy). SETID
     * and KILL: only the attach child raises CAP_SETUID/CAP_SETGID, to take
     * the JVM's ids, and CAP_KILL around its SIGQUIT; the worker itself
     * never has them effective */
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_SETID | PP_CAP_STEP_SETID |
                    PP_CAP_STEP_KILL | PP_CAP_STEP_FILE_OVERRIDE | PP_CAP_NEEDS_KILL |
                    PP_CAP_NEEDS_PTRACE | PP_CAP_NEEDS_FILE_OVERRIDE,
    .match_exe = NULL,
    .match_maps = maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = java_init,
    .start = java_start,
    .add_targets = java_add_targets,
    .tick = java_tick,
    .snapshot = java_snapshot,
    .stop = java_stop,
    .fini = java_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
