/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof php plugin: PHP call stacks read from outside the process, the
 * way phpspy does (process_vm_readv of executor_globals and the
 * zend_execute_data chain), without stopping the target.
 *
 * Every target is walked once per period of the session frequency, and a
 * new one also at every probe tick until its first stack, so a short CLI
 * run is read from the moment its script runs; identical stacks are
 * aggregated and handed over at snapshot. Frames carry
 * "Class::function", the file and the executing line; the core writes them
 * as gProfiler does: "<name> <file>:<line>_[php]".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "php.h"

static const char *const mode_choices[] = {"phpspy", NULL};
/* the CLI, FPM (master and workers), CGI; mod_php via its library */
const char *const php_match_exe[] = {"php", "php[0-9]*", "php-fpm*", "php-cgi*", NULL};
static const char *const match_maps[] = {"libphp*.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "disabled",
     .choices = mode_choices,
     .help = "PHP profiling: 'phpspy' (read stacks from outside the process) or 'disabled'"},
    {.key = "proc_filter",
     .type = PP_OPT_STRING,
     .cli_flag = "php-proc-filter",
     .default_value = NULL,
     .help = "only PHP processes whose comm or command line contains this text (phpspy -P); "
             "unset: php, php-fpm*, php-cgi* and processes mapping libphp*.so"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "128",
     .min = 1,
     .max = PHP_MAX_DEPTH_LIMIT,
     .help = "frames read per stack; deeper stacks keep their innermost frames"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 64,
     .max = 1 << 20,
     .help = "distinct stacks kept between snapshots; more are dropped and counted"},
    {.key = "arena_kib",
     .type = PP_OPT_INT,
     .default_value = "8192",
     .min = 64,
     .max = 1 << 20,
     .help = "memory for the text of those stacks (KiB)"},
    {.key = "function_cache",
     .type = PP_OPT_INT,
     .default_value = "4096",
     .min = 16,
     .max = 1 << 20,
     .help = "cached function names/files (entries, ~800 bytes each)"},
    {.key = "wall",
     .type = PP_OPT_BOOL,
     .cli_flag = "php-wall",
     .default_value = "false",
     .help = "every PHP process at every tick, running or waiting (the wall profile; --mode "
             "wall sets it); false: only processes on a CPU"},
};

#define IMAGE_CHECK_NS 1000000000ull /* how often a target's program image is checked */
/* A new target is walked this often until its first stack: PHP's start-up
 * (before any script runs) takes 10-30 ms, a CLI program often a few
 * hundred ms in all, and at 11 Hz two or three regular walks can all fall
 * into the start-up or miss the process. Ticks come this often only while
 * a target is probed: an idle host pays for the session frequency only. */
#define PROBE_NS 10000000ull
/* and for this long at most: an FPM worker waiting for its first request is
 * idle for good, and reading it at the probe rate would buy nothing */
#define PROBE_WINDOW_NS 1000000000ull

static void php_fini(void *state);

static int php_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct php_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  const char *filter = pp_opt_string(host, PP_OPTIONS(options), "proc_filter");
  if (filter && filter[0]) st->proc_filter = filter;
  st->max_depth = (uint32_t)pp_opt_int(host, PP_OPTIONS(options), "max_depth");
  size_t max_stacks = (size_t)pp_opt_int(host, PP_OPTIONS(options), "max_stacks");
  size_t arena = (size_t)pp_opt_int(host, PP_OPTIONS(options), "arena_kib") * 1024;
  size_t cache = (size_t)pp_opt_int(host, PP_OPTIONS(options), "function_cache");
  st->wall_opt = pp_opt_bool(host, PP_OPTIONS(options), "wall");
  size_t refs = max_stacks * st->max_depth;
  struct pp_stack_table_limits lim = {.max_stacks = max_stacks,
                                      .max_string_bytes = arena,
                                      .max_frame_refs = refs < (4u << 20) ? refs : (4u << 20),
                                      .max_depth = st->max_depth};
  static const struct pp_target_ops ops = {.attach = php_attach_process,
                                           .release = php_release_target};
  /* a recycled FPM worker is usually seen by its failed read; this also
   * catches a pid reused or an exec between two reads */
  struct pp_target_table_config tcfg = {.liveness_ns = 1000000000ull};
  st->walker = php_walker_new(cache, st->max_depth);
  st->stacks = pp_stack_table_new(&lim);
  st->targets = pp_target_table_new(host, &ops, st, &tcfg);
  if (!st->walker || !st->stacks || !st->targets) {
    php_fini(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int php_start(void *state, struct pp_session *session) {
  struct php_state *st = state;
  php_types_start(&st->types, st->wall_opt, session);
  /* every target is walked once a period; while a new one waits for its
   * first stack, ticks come at the probe rate in between */
  st->session = session;
  st->period_ns = session->tick_interval_ns;
  st->next_sample_ns = 0;
  PP_INFO(st->host, "sampling PHP stacks at %u Hz (%s%s)%s%s", session->frequency_hz,
          st->types.wall ? "every process: wall" : "processes on a CPU",
          st->types.offcpu ? ", waiting ones as off-CPU time" : "",
          st->proc_filter ? ", filter " : "", st->proc_filter ? st->proc_filter : "");
  return 0;
}

/* Ticks at the probe rate while a target waits for its first stack, else
 * at the session frequency. */
static void set_tick_rate(struct php_state *st, uint64_t now_ns) {
  if (!st->session || st->period_ns <= PROBE_NS) return;
  bool probing = false;
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    const struct php_target *pt = t->data;
    if (!pt->denied && !pt->sampled && (!pt->probe_end_ns || now_ns < pt->probe_end_ns)) {
      probing = true;
      break;
    }
  }
  st->session->tick_interval_ns = probing ? PROBE_NS : st->period_ns;
}

static int php_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct php_state *st = state;
  int rc = pp_target_table_add(st->targets, tg, n);
  set_tick_rate(st, pp_clock_ns());
  return rc;
}

/* Whether this tick walks t: every target once a period, a new one at
 * every tick until its first stack (within its probe window). */
static bool walk_due(struct php_target *pt, bool regular, uint64_t now_ns) {
  if (regular) return true;
  if (pt->sampled) return false;
  if (!pt->probe_end_ns) pt->probe_end_ns = now_ns + PROBE_WINDOW_NS;
  return now_ns < pt->probe_end_ns;
}

/* One stack of every attached target per period; new targets probed. */
static int php_tick(void *state, uint64_t now_ns) {
  struct php_state *st = state;
  pp_target_table_poll(st->targets, now_ns);
  bool regular = now_ns >= st->next_sample_ns;
  if (regular) {
    /* fixed rate, no burst of catch-up walks after a late tick */
    st->next_sample_ns += st->period_ns;
    if (st->next_sample_ns <= now_ns) st->next_sample_ns = now_ns + st->period_ns;
  }
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct php_target *pt = t->data;
    if (pt->denied || !walk_due(pt, regular, now_ns)) continue;
    if (now_ns >= pt->image_checked_ns + IMAGE_CHECK_NS) {
      /* PHP exec'ing PHP: same file, so the table's own check cannot see
       * it, and the old executor_globals address may well be mapped in the
       * new image (reads succeed, stacks are torn or idle for good) */
      pt->image_checked_ns = now_ns;
      uint64_t start = php_image_start(t->pid);
      if (start && pt->image_start && start != pt->image_start) {
        st->reattached++;
        pp_target_table_reattach(st->targets, t);
        continue;
      }
    }
    char pstate;
    if (!regular) {
      /* a probe looks for running PHP code only: a waiting process's stack
       * would be counted as time it did not spend (off-CPU, wall) */
      if (pp_proc_state(t->pid, 0, &pstate) < 0) pstate = 0; /* gone: the walk says so */
      if (pstate != 'R' && pstate != 0) continue;
    } else if (!php_types_walk(&st->types, t->pid, &pstate)) {
      continue; /* waiting: no CPU time */
    }
    const struct pp_frame *frames;
    uint32_t nf = 0;
    switch (php_walk(st->walker, t->pid, &pt->at, &frames, &nf)) {
      case PHP_WALK_TRUNCATED:
        st->truncated++;
        /* fall through */
      case PHP_WALK_OK:
        st->samples++;
        if (!regular) st->probed++;
        pt->sampled = true;
        if (nf)
          php_types_record(&st->types, st->stacks, t->pid, pt->comm[0] ? pt->comm : NULL, frames,
                           nf, pstate);
        break;
      case PHP_WALK_IDLE:
        if (!regular) break; /* a probe found no script yet */
        st->idle++;
        php_types_record(&st->types, st->stacks, t->pid, pt->comm[0] ? pt->comm : NULL, NULL, 0,
                         pstate);
        break;
      case PHP_WALK_TORN:
        st->torn++;
        break;
      case PHP_WALK_DENIED:
        st->denied++;
        pt->denied = true;
        snprintf(t->reason, sizeof(t->reason),
                 "cannot read memory of pid %u: permission denied (CAP_SYS_PTRACE)", t->pid);
        PP_WARNING(st->host, "%s", t->reason);
        break;
      case PHP_WALK_LOST:
        st->reattached++;
        pp_target_table_reattach(st->targets, t);
        break;
      default: /* exited (an FPM worker recycled): a new pid comes through add_targets */
        st->gone++;
        pp_target_table_gone(st->targets, t);
        break;
    }
  }
  set_tick_rate(st, now_ns);
  return 0;
}

/* dump(): each process's PHP stack, read once. The plugin reads NTS builds
 * only (ZTS is refused at attach), whose script runs on the main thread:
 * its tid is the pid. A process between requests has no stack to show. */
static int php_dump(void *state, struct pp_sink *sink) {
  struct php_state *st = state;
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct php_target *pt = t->data;
    if (pt->denied) continue;
    const struct pp_frame *frames;
    uint32_t nf = 0;
    int r = php_walk(st->walker, t->pid, &pt->at, &frames, &nf);
    if ((r != PHP_WALK_OK && r != PHP_WALK_TRUNCATED) || !nf) continue;
    struct pp_sample smp = {.pid = t->pid,
                            .tid = t->pid,
                            .comm = pt->comm[0] ? pt->comm : NULL,
                            .frames = frames,
                            .nframes = nf,
                            .count = 1};
    st->host->emit(sink, &smp);
  }
  return 0;
}

static int php_snapshot(void *state, struct pp_sink *sink) {
  struct php_state *st = state;
  const struct pp_host *h = st->host;
  uint64_t dropped = pp_stack_table_dropped(st->stacks);
  if (dropped)
    PP_WARNING(h, "stack table full: %llu samples dropped (max_stacks / arena_kib)",
               (unsigned long long)dropped);
  pp_stack_table_emit(st->stacks, h, sink);
  pp_target_table_report(st->targets, sink);
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    const struct php_target *pt = t->data;
    if (pt->denied) {
      h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->reason);
      continue;
    }
    char meta[96];
    snprintf(meta, sizeof(meta), "{\"php_version\": \"%d.%d\", \"php_layout\": \"%s\"}",
             pt->at.major, pt->at.minor, pt->at.layout->tested ? "tested" : "untested");
    h->set_app_metadata(sink, t->pid, meta);
  }
  h->add_counter(sink, "samples", st->samples);
  h->add_counter(sink, "idle", st->idle);
  if (st->types.off_cpu) h->add_counter(sink, "waiting_skipped", st->types.off_cpu);
  st->types.off_cpu = 0;
  h->add_counter(sink, "torn_samples", st->torn);
  h->add_counter(sink, "truncated_stacks", st->truncated);
  h->add_counter(sink, "exited_targets", st->gone);
  if (st->reattached) h->add_counter(sink, "reattached_targets", st->reattached);
  h->add_counter(sink, "first_samples_probed", st->probed);
  h->add_counter(sink, "stale_lines", php_walker_take_stale_lines(st->walker));
  st->samples = st->idle = st->torn = st->truncated = st->gone = st->reattached = st->probed = 0;
  return 0;
}

static int php_stop(void *state) {
  struct php_state *st = state; /* targets stay attached: the next session re-announces them */
  st->session = NULL;
  return 0;
}

static void php_fini(void *state) {
  struct php_state *st = state;
  if (!st) return;
  pp_target_table_free(st->targets); /* releases through the walker: freed after */
  pp_stack_table_free(st->stacks);
  php_walker_free(st->walker);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "php",
    .version = "0.1.0",
    .description = "PHP call stacks read from outside the process (phpspy-style)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE | PP_CAP_ARCH_X86_64,
    .match_exe = php_match_exe,
    .match_maps = match_maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = php_init,
    .start = php_start,
    .add_targets = php_add_targets,
    .tick = php_tick,
    .snapshot = php_snapshot,
    .stop = php_stop,
    .fini = php_fini,
    .dump = php_dump,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
