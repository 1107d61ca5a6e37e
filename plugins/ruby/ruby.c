/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof ruby plugin: Ruby call stacks read from outside the process, as
 * rbspy does, without stopping the target. A thread of its own
 * (ruby_sampler.c) samples each Ruby thread per 1/frequency of CPU time it
 * uses; stacks are counted in the kit's stack table and handed over at
 * snapshot, where they replace perf's native stacks of the same pids.
 * This file: the descriptor, the options and the vtable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit/json.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/options.h"
#include "polyprof/kit/proc.h"
#include "ruby.h"

/* First attach retry of a process still starting; the table doubles it. */
#define ATTACH_RETRY_FIRST_NS 200000000ull
/* How often the sampler's housekeeping checks that attached targets are
 * still the process and image they were (exit, pid reuse, exec). */
#define LIVENESS_NS 2000000000ull

static const char *const mode_choices[] = {"rbspy", NULL};
static const char *const thread_ids_choices[] = {"auto", "pthread", NULL};
static const char *const match_exe[] = {"ruby*", NULL};
static const char *const match_maps[] = {"libruby*.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "rbspy",
     .choices = mode_choices,
     .help = "'rbspy': sample Ruby stacks from outside the process (gProfiler's name)"},
    {.key = "oncpu",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "sample Ruby threads per CPU time they use (gProfiler: rbspy --oncpu); false: "
             "every thread on wall-clock ticks"},
    {.key = "frequency",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 1000,
     .help = "samples per second; 0: the session frequency, capped at 100 as gProfiler does"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "2048",
     .min = 16,
     .max = 16384,
     .help = "frames kept per stack (the leaf side is kept)"},
    {.key = "max_threads",
     .type = PP_OPT_INT,
     .default_value = "64",
     .min = 1,
     .max = RUBY_MAX_THREADS_HARD,
     .help = "Ruby threads sampled per process"},
    {.key = "cache_size",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 256,
     .max = 1 << 20,
     .help = "entries of the iseq/frame caches (bounded memory)"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 256,
     .max = 1 << 20,
     .help = "distinct stacks kept per session; overflow is counted as dropped"},
    {.key = "attach_retries",
     .type = PP_OPT_INT,
     .default_value = "25",
     .min = 1,
     .max = 1000,
     .help = "attempts to find the VM in a process still starting (the first retry after "
             "200 ms, then backing off)"},
    {.key = "wake_batch_ms",
     .type = PP_OPT_INT,
     .default_value = "10",
     .min = 0,
     .max = 1000,
     .help = "after a wake-up that sampled, CPU alarms firing within this many ms (at most one "
             "sampling period) are served by one wake-up; 0: a wake-up per alarm"},
    {.key = "thread_ids",
     .type = PP_OPT_ENUM,
     .default_value = "auto",
     .choices = thread_ids_choices,
     .help = "where threads' kernel tids are read: 'auto' (Ruby's own field, 3.1+; libc's struct "
             "pthread before); 'pthread' (struct pthread everywhere: tests that path on 3.1)"},
    {.key = "c_function_names",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "name C methods ('sort_by [c function]') through Ruby's symbol table"},
};

static void state_free(struct ruby_state *st) {
  free(st->cfp_buf);
  free(st->ids);
  free(st->eps);
  free(st->misses);
  free(st->out);
  ruby_iseqs_free(&st->iseqs);
  ruby_strings_free(&st->strings);
  ruby_frames_free(&st->frames);
  ruby_cache_free(&st->iseq_cache);
  ruby_cache_free(&st->cfunc_cache);
  pp_stack_table_free(st->stacks);
  free(st);
}

static int ruby_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct ruby_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->epfd = st->wakefd = -1;
  st->oncpu = pp_opt_bool(host, PP_OPTIONS(options), "oncpu");
  st->cfunc_names = pp_opt_bool(host, PP_OPTIONS(options), "c_function_names");
  const char *ids = pp_opt_string(host, PP_OPTIONS(options), "thread_ids");
  st->tids_from_pthread = ids && strcmp(ids, "pthread") == 0;
  st->max_depth = pp_opt_int(host, PP_OPTIONS(options), "max_depth");
  st->max_threads = pp_opt_int(host, PP_OPTIONS(options), "max_threads");
  st->cache_size = pp_opt_int(host, PP_OPTIONS(options), "cache_size");
  st->max_stacks = pp_opt_int(host, PP_OPTIONS(options), "max_stacks");
  st->attach_retries = pp_opt_int(host, PP_OPTIONS(options), "attach_retries");
  st->wake_batch_ms = pp_opt_int(host, PP_OPTIONS(options), "wake_batch_ms");
  size_t cache = (size_t)st->cache_size, depth = (size_t)st->max_depth;
  int rc = 0;
  rc |= ruby_strings_init(&st->strings, cache * 96);
  rc |= ruby_frames_init(&st->frames, cache * 2);
  rc |= ruby_cache_init(&st->iseq_cache, cache);
  rc |= ruby_cache_init(&st->cfunc_cache, cache / 4 + 64);
  rc |= ruby_iseqs_init(&st->iseqs, cache / 4 + 64);
  /* a session's strings are a subset of the frame tables' */
  struct pp_stack_table_limits lim = {.max_stacks = (size_t)st->max_stacks,
                                      .max_string_bytes = cache * 96,
                                      .max_frame_refs = (size_t)st->max_stacks * 64,
                                      .max_depth = (uint32_t)depth};
  st->stacks = pp_stack_table_new(&lim);
  st->cfp_buf = malloc(depth * 64);
  st->ids = malloc((depth + 1) * sizeof(*st->ids));
  st->eps = malloc((depth + 1) * sizeof(*st->eps));
  st->misses = malloc((depth + 1) * sizeof(*st->misses));
  st->out = malloc((depth + 1) * sizeof(*st->out));
  if (!rc) rc = pthread_mutex_init(&st->lock, NULL) ? -1 : 0;
  if (rc || !st->stacks || !st->cfp_buf || !st->ids || !st->eps || !st->misses || !st->out) {
    state_free(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

/* Frames that must exist whatever the tables hold; re-added after a clear. */
static void add_fixed_frames(struct ruby_state *st) {
  const char *n = RUBY_CFUNC_UNKNOWN;
  struct ruby_frame fr = {.name = ruby_strings_intern(&st->strings, n, strlen(n)),
                          .file = RUBY_NO_ID,
                          .line = 0,
                          .kind = PP_FRAME_NATIVE};
  st->unknown_cfunc_id = ruby_frames_add(&st->frames, &fr);
}

static int ruby_start(void *state, struct pp_session *session) {
  struct ruby_state *st = state;
  int64_t freq = pp_opt_int(st->host, PP_OPTIONS(options), "frequency");
  if (freq <= 0) freq = session->frequency_hz > 100 ? 100 : session->frequency_hz;
  if (freq <= 0) freq = 11;
  st->period_ns = 1000000000ull / (uint64_t)freq;
  /* a stack is read at most one period after its alarm fired */
  st->batch_ns = (uint64_t)st->wake_batch_ms * 1000000ull;
  if (st->batch_ns > st->period_ns) st->batch_ns = st->period_ns;
  /* the host's ticks are not used: the sampler thread sleeps until a
   * thread has used a period of CPU (or until its own tick, see
   * ruby_sampler.c), which a fixed host tick would defeat */
  session->tick_interval_ns = 0;
  /* off-CPU stacks need every thread looked at on ticks: a CPU alarm
   * never fires for a thread that waits */
  st->offcpu = (session->flags & PP_SESSION_OFFCPU) != 0;
  int probe = st->oncpu && !st->offcpu ? ruby_cpuclock_probe(st->period_ns) : -EINVAL;
  st->use_cpuclock = probe == 0;
  add_fixed_frames(st);
  static const struct pp_target_ops ops = {.attach = ruby_attach, .release = ruby_target_release};
  struct pp_target_table_config tcfg = {.retry_attempts = (uint32_t)st->attach_retries,
                                        .retry_first_ns = ATTACH_RETRY_FIRST_NS,
                                        .liveness_ns = LIVENESS_NS};
  st->tt = pp_target_table_new(st->host, &ops, st, &tcfg);
  if (!st->tt) return -ENOMEM;
  if (st->oncpu && !st->offcpu && !st->use_cpuclock)
    PP_WARNING(st->host,
               "perf task-clock events unavailable (%s): sampling Ruby threads on wall-clock "
               "ticks, which costs CPU even when they sleep",
               strerror(-probe));
  PP_INFO(st->host, "sampling Ruby stacks at %lld Hz %s%s (max depth %lld)", (long long)freq,
          st->use_cpuclock ? "of each thread's CPU time"
          : st->oncpu      ? "of wall-clock time, threads that ran"
                           : "of wall-clock time, all threads",
          st->offcpu ? ", blocked ones as off-CPU time" : "", (long long)st->max_depth);
  int rc = ruby_sampler_start(st);
  if (rc) {
    PP_ERROR(st->host, "cannot start the sampling thread: %s", strerror(-rc));
    pp_target_table_free(st->tt);
    st->tt = NULL;
  }
  return rc;
}

static int ruby_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct ruby_state *st = state;
  if (!st->tt) return -EINVAL;
  pthread_mutex_lock(&st->lock);
  st->now_ns = pp_clock_ns();
  int rc = pp_target_table_add(st->tt, tg, n);
  pthread_mutex_unlock(&st->lock);
  ruby_sampler_wake(st); /* their alarms and ticks: now, not at the next housekeeping */
  return rc;
}

/* Application metadata and appid of an attached target. */
static void target_extras(struct ruby_state *st, struct pp_sink *sink, struct ruby_target *t) {
  const struct pp_host *h = st->host;
  char version[64], series[32], meta[160];
  pp_json_string(version, sizeof(version), t->version);
  pp_json_string(series, sizeof(series), t->L->series);
  snprintf(meta, sizeof(meta), "{\"ruby_version\": %s, \"ruby_layout\": %s}", version, series);
  h->set_app_metadata(sink, t->pid, meta);
  char argv[4096], cwd[1024] = "", appid[512];
  size_t alen = 0;
  if (pp_proc_cmdline(t->pid, argv, sizeof(argv), &alen) == 0 && alen > 0) {
    pp_proc_cwd(t->pid, cwd, sizeof(cwd));
    if (ruby_server_appid(argv, alen, cwd, appid, sizeof(appid)) > 0)
      h->set_appid(sink, t->pid, appid);
  }
}

static int snapshot_locked(struct ruby_state *st, struct pp_sink *sink) {
  const struct pp_host *h = st->host;
  uint64_t dropped = pp_stack_table_dropped(st->stacks);
  if (st->c_full || dropped)
    PP_WARNING(h, "tables full: %llu samples dropped (max_stacks / cache_size)",
               (unsigned long long)(st->c_full + dropped));
  pp_stack_table_emit(st->stacks, h, sink);
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_ATTACHED) {
    struct ruby_target *t = e->data;
    target_extras(st, sink, t);
    pp_thread_cpu_sweep(t->cpu); /* task files of threads gone */
  }
  /* exits, statuses of the targets not profiled, and their removal */
  pp_target_table_report(st->tt, sink);
  h->add_counter(sink, "ticks", st->c_ticks);
  h->add_counter(sink, "samples", st->c_samples);
  h->add_counter(sink, "dropped_inconsistent", st->c_torn);
  h->add_counter(sink, "dropped_table_full", st->c_full);
  h->add_counter(sink, "truncated_stacks", st->c_truncated);
  h->add_counter(sink, "frames_unreadable", st->c_str_fail);
  h->add_counter(sink, "idle_ticks", st->c_idle);
  h->add_counter(sink, "exited_targets", st->c_gone);
  h->add_counter(sink, "wakeups", st->c_wakeups);
  h->add_counter(sink, "cpu_periods", st->c_alarms);
  h->add_counter(sink, "batch_pauses", st->c_pauses);
  h->add_counter(sink, "one_read_samples", st->c_guess_hits);
  st->c_samples = st->c_torn = st->c_full = st->c_truncated = st->c_str_fail = 0;
  st->c_idle = st->c_gone = st->c_ticks = st->c_wakeups = st->c_alarms = st->c_pauses = 0;
  st->c_guess_hits = 0;
  /* method entries can be freed and reused by another method: forget them
   * every session; and start over when the frame tables are half full so a
   * long run never fills them */
  ruby_cache_clear(&st->cfunc_cache);
  if (st->frames.n * 2 > st->frames.cap || st->strings.arena_used * 2 > st->strings.arena_cap) {
    ruby_frames_clear(&st->frames);
    ruby_strings_clear(&st->strings);
    ruby_cache_clear(&st->iseq_cache);
    ruby_iseqs_clear(&st->iseqs); /* its names are frame ids */
    add_fixed_frames(st);
  }
  return 0;
}

static int ruby_snapshot(void *state, struct pp_sink *sink) {
  struct ruby_state *st = state;
  if (!st->tt) return -EINVAL;
  pthread_mutex_lock(&st->lock);
  int rc = snapshot_locked(st, sink);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int ruby_dump(void *state, struct pp_sink *sink) {
  struct ruby_state *st = state;
  if (!st->tt) return -EINVAL;
  pthread_mutex_lock(&st->lock);
  int rc = ruby_dump_locked(st, sink);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int ruby_stop(void *state) {
  struct ruby_state *st = state;
  ruby_sampler_stop(st);
  pp_target_table_free(st->tt); /* releases every target: alarms, task files */
  st->tt = NULL;
  pp_stack_table_clear(st->stacks);
  if (st->epfd >= 0) close(st->epfd);
  if (st->wakefd >= 0) close(st->wakefd);
  st->epfd = st->wakefd = -1;
  return 0;
}

static void ruby_fini(void *state) {
  struct ruby_state *st = state;
  if (!st) return;
  ruby_stop(st);
  pthread_mutex_destroy(&st->lock);
  state_free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "ruby",
    .version = "0.1.0",
    .description = "Ruby stacks read from outside the process (rbspy-compatible frames)",
    /* perf: a task-clock event per thread (its CPU-time alarm), which a
     * kernel with perf_event_paranoid 3 allows CAP_PERFMON only */
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE | PP_CAP_NEEDS_PERFMON |
                    PP_CAP_ARCH_X86_64,
    .match_exe = match_exe,
    .match_maps = match_maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = ruby_init,
    .start = ruby_start,
    .add_targets = ruby_add_targets,
    .snapshot = ruby_snapshot,
    .stop = ruby_stop,
    .fini = ruby_fini,
    .dump = ruby_dump,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
