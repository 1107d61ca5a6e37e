/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof .NET (CoreCLR) plugin: descriptor, options and vtable (the files
 * are mapped in dotnet.h).
 *
 * Modes:
 *  - auto: perfmap while a system-wide plugin (perf) samples; without one
 *    (perf off, refused by the kernel, not configured) what `perfless`
 *    says: nothing (the daemon's default: every EventPipe way suspends the
 *    target at each sweep, more than a continuous profiler may cost it;
 *    each .NET process says why it has no samples) or dotnet-trace with
 *    the sampler in bursts (`polyprof run/attach`: one program, asked for).
 *  - dotnet-trace: an EventPipe session per target over the runtime's
 *    diagnostic socket (no tool in the target, no restart), with the
 *    SampleProfiler and the runtime provider's method events; the nettrace
 *    stream is parsed here (nettrace.c) and IPs are named from
 *    MethodLoadVerbose / rundown events (methods.c).
 *  - perfmap: EnablePerfMap (.NET 8+) so perf names JIT frames from
 *    /tmp/perf-<pid>.map; DisablePerfMap at stop. No stacks from here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dotnet.h"

/* The table's retries: 50 ms doubling to 60 s. A fresh runtime creates its
 * diagnostics socket some tens of ms after libcoreclr is mapped, when the
 * core hands it over: a short program (a build step) must be reached within
 * its first ~100 ms, or auto mode's perf map misses its early JIT code. A
 * runtime may also refuse a session for a while and recover: the doubling
 * keeps those retries few. */
#define RETRY_FIRST_NS 50000000ull
#define RETRY_MAX_NS 60000000000ull
#define RETRY_ATTEMPTS 12

static const char *const mode_choices[] = {"auto", "dotnet-trace", "perfmap", NULL};
static const char *const sampling_choices[] = {"bursts", "continuous", NULL};
static const char *const perfless_choices[] = {"none", "bursts", NULL};
static const char *const match_maps[] = {"libcoreclr.so", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "auto",
     .choices = mode_choices,
     .help = "auto: perfmap when perf samples, else as `perfless` says; dotnet-trace: "
             "EventPipe sampling in the agent (gProfiler's mode); perfmap: make the runtime write "
             "/tmp/perf-PID.map for perf; disabled"},
    {.key = "perfless",
     .type = PP_OPT_ENUM,
     .default_value = "none",
     .choices = perfless_choices,
     .help = "auto mode when no system-wide plugin samples (perf off or refused): none (no .NET "
             "samples; each .NET process's status says why) or bursts (dotnet-trace with the "
             "sampler in bursts, which suspends the target's managed threads at each sweep; "
             "polyprof run/attach's default)"},
    {.key = "sampling",
     .type = PP_OPT_ENUM,
     .default_value = "continuous",
     .choices = sampling_choices,
     .help = "dotnet-trace mode: continuous (the runtime's sampler sweeps every ~1-3 ms "
             "throughout, whatever rate is asked) or bursts (it runs in short bursts whose duty "
             "cycle gives the rate asked: fewer suspensions of the target, fewer and clustered "
             "samples; see docs/dotnet.md)"},
    {.key = "max_duty_pct",
     .type = PP_OPT_INT,
     .default_value = "10",
     .min = 1,
     .max = 100,
     .help = "sampling: bursts: the most of the time the runtime's sampler may run (each sweep "
             "suspends the target's managed threads); a rate that needs more gets fewer sweeps "
             "(logged)"},
    {.key = "buffer_mb",
     .type = PP_OPT_INT,
     .default_value = "32",
     .min = 1,
     .max = 1024,
     .help = "EventPipe buffer in the target per session (MiB); overflow drops events there"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 64,
     .max = 1 << 22,
     .help = "distinct stacks kept per target per session; more are counted as dropped"},
    {.key = "max_methods",
     .type = PP_OPT_INT,
     .default_value = "262144",
     .min = 1024,
     .max = 1 << 24,
     .help = "code ranges kept per target; the map is cleared when full"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "256",
     .min = 1,
     .max = 512,
     .help = "frames kept per stack (leaf end)"},
    {.key = "stop_timeout_ms",
     .type = PP_OPT_INT,
     .default_value = "10000",
     .min = 100,
     .max = 60000,
     .help = "how long a stopped session may go on streaming (its rundown included) before it is "
             "closed; snapshots never wait for it"},
    {.key = "wall",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "also count threads outside managed code (blocked, native): wall-clock profile"},
    {.key = "rundown",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "request a method rundown when attaching (names code compiled before the first "
             "session; see rundown_interval_s)"},
    {.key = "rundown_interval_s",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 86400,
     .help = "rundown again this often after attaching (exact sizes for ReadyToRun code first "
             "run later, named from its entry points meanwhile); 0: only when attaching and "
             "after the method map overflowed"},
    {.key = "max_block_kb",
     .type = PP_OPT_INT,
     .default_value = "4096",
     .min = 64,
     .max = 65536,
     .help = "largest nettrace block accepted; a larger one ends the stream"},
    {.key = "attach_timeout_s",
     .type = PP_OPT_INT,
     .default_value = "30",
     .min = 0,
     .max = 3600,
     .help = "how long to retry a process whose diagnostic socket is not there yet"},
};

#define OPT_INT(h, key) pp_opt_int((h), PP_OPTIONS(options), (key))
#define OPT_BOOL(h, key) pp_opt_bool((h), PP_OPTIONS(options), (key))

/* attach() calls whose retry waits (doubling) cover `seconds`. */
static uint32_t attempts_covering(uint32_t seconds) {
  uint32_t n = 1;
  uint64_t waited = 0, wait = RETRY_FIRST_NS;
  while (waited < (uint64_t)seconds * 1000000000ull) {
    waited += wait;
    wait = wait * 2 > RETRY_MAX_NS ? RETRY_MAX_NS : wait * 2;
    n++;
  }
  return n;
}

static int new_table(struct dotnet_state *st) {
  if (st->targets) return 0;
  uint32_t attempts = st->socket_attempts > RETRY_ATTEMPTS ? st->socket_attempts : RETRY_ATTEMPTS;
  struct pp_target_table_config cfg = {
      .retry_attempts = attempts, .retry_first_ns = RETRY_FIRST_NS, .retry_max_ns = RETRY_MAX_NS};
  st->targets = pp_target_table_new(st->host, &dotnet_target_ops, st, &cfg);
  return st->targets ? 0 : -ENOMEM;
}

static int dn_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct dotnet_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->cfg.buffer_mb = (uint32_t)OPT_INT(host, "buffer_mb");
  st->cfg.max_stacks = (uint32_t)OPT_INT(host, "max_stacks");
  st->cfg.max_depth = (uint32_t)OPT_INT(host, "max_depth");
  st->cfg.stop_timeout_ms = (uint32_t)OPT_INT(host, "stop_timeout_ms");
  st->cfg.max_block = (uint32_t)OPT_INT(host, "max_block_kb") * 1024;
  st->cfg.wall = OPT_BOOL(host, "wall");
  st->cfg.rundown = OPT_BOOL(host, "rundown");
  st->cfg.rundown_interval_s = (uint32_t)OPT_INT(host, "rundown_interval_s");
  const char *sampling = pp_opt_string(host, PP_OPTIONS(options), "sampling");
  st->bursts_opt = !sampling || strcmp(sampling, "continuous") != 0;
  const char *perfless = pp_opt_string(host, PP_OPTIONS(options), "perfless");
  st->perfless_bursts = perfless && strcmp(perfless, "bursts") == 0;
  st->cfg.max_duty_pct = (uint32_t)OPT_INT(host, "max_duty_pct");
  st->max_methods = (uint32_t)OPT_INT(host, "max_methods");
  st->attach_timeout_s = (uint32_t)OPT_INT(host, "attach_timeout_s");
  st->socket_attempts = attempts_covering(st->attach_timeout_s);
  if (new_table(st) < 0) {
    free(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int dn_start(void *state, struct pp_session *session) {
  struct dotnet_state *st = state;
  const char *mode = session->mode ? session->mode : "auto";
  st->auto_mode = strcmp(mode, "auto") == 0;
  st->mode_reason[0] = '\0';
  st->cfg.bursts = st->bursts_opt;
  st->perfless_skip = false;
  if (st->auto_mode) {
    /* perf names JIT code from the map and, from the image files,
     * precompiled code; without it the plugin samples, in bursts, the
     * cheaper of its EventPipe ways. perf samples threads on a CPU only:
     * wall time (managed threads whatever they do, `polyprof run`'s
     * default) takes the runtime's sampler, as configured */
    bool perf = !(session->flags & PP_SESSION_PERFLESS);
    const char *why;
    if (st->cfg.wall) {
      mode = "dotnet-trace";
      why = "auto: wall time asked, which perf does not give: dotnet-trace";
    } else if (perf) {
      mode = "perfmap";
      why = "auto: perf samples, the runtime writes its perf map";
    } else if (st->perfless_bursts) {
      mode = "dotnet-trace";
      st->cfg.bursts = true;
      why =
          "auto: no system-wide plugin samples (perf disabled, refused by the kernel or not "
          "configured): dotnet-trace with the sampler in bursts";
    } else {
      /* targets still matched, so that every .NET process carries the reason */
      mode = "none";
      st->perfless_skip = true;
      why =
          "auto: no system-wide plugin samples (perf disabled, refused by the kernel or not "
          "configured), and EventPipe sampling suspends the target: .NET not sampled "
          "(dotnet.perfless: bursts accepts that cost)";
    }
    snprintf(st->mode_reason, sizeof(st->mode_reason), "%s", why);
    PP_INFO(st->host, "mode %s", st->mode_reason);
  }
  st->trace_mode = strcmp(mode, "dotnet-trace") == 0;
  st->perfmap_mode = strcmp(mode, "perfmap") == 0;
  st->mode_name = st->perfless_skip  ? "none (no perf)"
                  : st->perfmap_mode ? "perfmap"
                  : st->cfg.bursts   ? "dotnet-trace (bursts)"
                                     : "dotnet-trace";
  st->cfg.frequency_hz = session->frequency_hz ? session->frequency_hz : 100;
  /* the stream is read from tick(): often enough that the runtime's buffer
   * never fills, rarely enough to cost nothing */
  session->tick_interval_ns = 50000000ull;
  /* bursts are started and stopped from tick(): a finer tick keeps them
   * short at low rates */
  if (st->trace_mode && st->cfg.bursts) session->tick_interval_ns = 10000000ull;
  st->cfg.tick_ns = session->tick_interval_ns;
  PP_INFO(st->host, "mode %s, %u Hz per thread, %s threads%s", mode, st->cfg.frequency_hz,
          st->cfg.wall ? "all managed" : "running managed",
          st->trace_mode ? (st->cfg.bursts ? ", sampler in bursts" : ", sampler continuous") : "");
  return new_table(st);
}

static int dn_add_targets(void *state, const struct pp_target *tg, size_t count) {
  struct dotnet_state *st = state;
  int rc = new_table(st);
  return rc < 0 ? rc : pp_target_table_add(st->targets, tg, count);
}

static int dn_tick(void *state, uint64_t now) {
  (void)now;
  dotnet_targets_pump(state);
  return 0;
}

static int dn_snapshot(void *state, struct pp_sink *sink) {
  dotnet_targets_snapshot(state, sink);
  return 0;
}

/* Every session ends and every target is released: the next start() looks
 * at the processes it is handed afresh. */
static int dn_stop(void *state) {
  struct dotnet_state *st = state;
  dotnet_targets_stop(st);
  pp_target_table_free(st->targets);
  st->targets = NULL;
  /* after DisablePerfMap, and after the last session's profile was
   * written (perf named its frames): the maps polyprof caused go */
  dotnet_mapfiles_sweep(st, true);
  return 0;
}

static void dn_fini(void *state) {
  struct dotnet_state *st = state;
  if (!st) return;
  pp_target_table_free(st->targets);
  dotnet_mapfiles_sweep(st, true);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "dotnet",
    .version = "0.1.0",
    .description = ".NET (CoreCLR): perf maps for perf, or managed stacks via EventPipe",
    /* Every privilege but reading is a step: FILE_OVERRIDE around the
     * connect to the runtime's owner-only socket, FILE_OWNER around the
     * removal of the perf map the runtime wrote at our request from a
     * sticky /tmp that is not root's (dotnet_mapfiles.c) */
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE |
                    PP_CAP_NEEDS_FILE_OVERRIDE | PP_CAP_STEP_FILE_OVERRIDE |
                    PP_CAP_NEEDS_FILE_OWNER | PP_CAP_STEP_FILE_OWNER,
    .match_exe = NULL,
    .match_maps = match_maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = dn_init,
    .start = dn_start,
    .add_targets = dn_add_targets,
    .tick = dn_tick,
    .snapshot = dn_snapshot,
    .stop = dn_stop,
    .fini = dn_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
