/*
 * polyprof ruby plugin: Ruby call stacks read from outside the process, as
 * rbspy does (reference php-ruby-remote.md §3-§6), without stopping the
 * target. A thread of its own (ruby_sampler.c) samples each Ruby thread
 * per 1/frequency of CPU time it uses; stacks are aggregated in bounded
 * tables and handed over at snapshot, where they replace perf's native
 * stacks of the same pids.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "ruby.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"

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
     .help = "attempts (200 ms apart) to find the VM in a process still starting"},
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

static int ruby_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct ruby_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->epfd = st->wakefd = -1;
  int b = 1;
  st->oncpu = host->config_bool(host, "oncpu", &b) == 0 ? b : 1;
  b = 1;
  st->cfunc_names = host->config_bool(host, "c_function_names", &b) == 0 ? b : 1;
  const char *ids = NULL;
  st->tids_from_pthread =
      host->config_string(host, "thread_ids", &ids) == 0 && ids && strcmp(ids, "pthread") == 0;
  st->max_depth = 2048;
  st->max_threads = 64;
  st->cache_size = 16384;
  st->max_stacks = 16384;
  st->attach_retries = 25;
  st->wake_batch_ms = 10;
  host->config_int(host, "max_depth", &st->max_depth);
  host->config_int(host, "max_threads", &st->max_threads);
  host->config_int(host, "cache_size", &st->cache_size);
  host->config_int(host, "max_stacks", &st->max_stacks);
  host->config_int(host, "attach_retries", &st->attach_retries);
  host->config_int(host, "wake_batch_ms", &st->wake_batch_ms);
  size_t cache = (size_t)st->cache_size;
  int rc = 0;
  rc |= ruby_strings_init(&st->strings, cache * 96);
  rc |= ruby_frames_init(&st->frames, cache * 2);
  rc |= ruby_cache_init(&st->iseq_cache, cache);
  rc |= ruby_cache_init(&st->cfunc_cache, cache / 4 + 64);
  rc |= ruby_iseqs_init(&st->iseqs, cache / 4 + 64);
  rc |= ruby_stacks_init(&st->stacks, (size_t)st->max_stacks, (size_t)st->max_stacks * 64);
  st->cfp_buf = malloc((size_t)st->max_depth * 64);
  st->ids = malloc(((size_t)st->max_depth + 1) * sizeof(*st->ids));
  st->eps = malloc(((size_t)st->max_depth + 1) * sizeof(*st->eps));
  st->misses = malloc(((size_t)st->max_depth + 1) * sizeof(*st->misses));
  if (!rc) rc = pthread_mutex_init(&st->lock, NULL) ? -1 : 0;
  if (rc || !st->cfp_buf || !st->ids || !st->eps || !st->misses) {
    free(st->cfp_buf);
    free(st->ids);
    free(st->eps);
    free(st->misses);
    ruby_iseqs_free(&st->iseqs);
    ruby_strings_free(&st->strings);
    ruby_frames_free(&st->frames);
    ruby_cache_free(&st->iseq_cache);
    ruby_cache_free(&st->cfunc_cache);
    ruby_stacks_free(&st->stacks);
    free(st);
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
  int64_t freq = 0;
  st->host->config_int(st->host, "frequency", &freq);
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
  int probe = st->oncpu ? ruby_cpuclock_probe(st->period_ns) : -EINVAL;
  st->use_cpuclock = probe == 0;
  add_fixed_frames(st);
  if (st->oncpu && !st->use_cpuclock)
    RUBY_LOG(st, PP_LOG_WARNING,
             "perf task-clock events unavailable (%s): sampling Ruby threads on wall-clock "
             "ticks, which costs CPU even when they sleep",
             strerror(-probe));
  RUBY_LOG(st, PP_LOG_INFO, "sampling Ruby stacks at %lld Hz %s (max depth %lld)", (long long)freq,
           st->use_cpuclock ? "of each thread's CPU time"
           : st->oncpu      ? "of wall-clock time, threads that ran"
                            : "of wall-clock time, all threads",
           (long long)st->max_depth);
  int rc = ruby_sampler_start(st);
  if (rc) RUBY_LOG(st, PP_LOG_ERROR, "cannot start the sampling thread: %s", strerror(-rc));
  return rc;
}

static int add_targets_locked(struct ruby_state *st, const struct pp_target *tg, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t j;
    for (j = 0; j < st->ntargets; j++)
      if (st->targets[j].pid == tg[i].pid) break;
    if (j < st->ntargets) {
      if (st->targets[j].start_time == tg[i].start_time) continue;
      ruby_target_release(st, &st->targets[j]); /* pid reused by a new process */
    } else {
      if (st->ntargets == st->targets_cap) {
        size_t ncap = st->targets_cap ? st->targets_cap * 2 : 16;
        struct ruby_target *g = realloc(st->targets, ncap * sizeof(*g));
        if (!g) return -ENOMEM;
        st->targets = g;
        st->targets_cap = ncap;
      }
      st->ntargets++;
    }
    struct ruby_target *t = &st->targets[j];
    *t = (struct ruby_target){.pid = tg[i].pid, .start_time = tg[i].start_time};
    t->threads = calloc((size_t)st->max_threads, sizeof(*t->threads));
    if (!t->threads) {
      st->ntargets--;
      return -ENOMEM;
    }
    t->pthread_tid_off = -1;
    if (pp_proc_ns_pid(t->pid, &t->ns_pid) < 0) t->ns_pid = t->pid;
  }
  return 0;
}

static int ruby_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct ruby_state *st = state;
  pthread_mutex_lock(&st->lock);
  int rc = add_targets_locked(st, tg, n);
  pthread_mutex_unlock(&st->lock);
  ruby_sampler_wake(st); /* attach them now, not at the next housekeeping */
  return rc;
}

static void target_extras(struct ruby_state *st, struct pp_sink *sink, struct ruby_target *t) {
  const struct pp_host *h = st->host;
  if (t->state == RUBY_T_SKIPPED) {
    h->set_pid_status(sink, t->pid, PP_PID_SKIPPED, t->reason);
    return;
  }
  if (t->state == RUBY_T_ERROR) {
    h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->reason);
    return;
  }
  if (t->state != RUBY_T_OK) return;
  char meta[160];
  snprintf(meta, sizeof(meta), "{\"ruby_version\": \"%s\", \"ruby_layout\": \"%s\"}", t->version,
           t->L->series);
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
  struct pp_frame *frames = (struct pp_frame *)st->cfp_buf; /* max_depth*64 bytes >= frames */
  for (size_t i = 0; i < st->stacks.used; i++) {
    const struct ruby_stack *s = &st->stacks.v[i];
    uint32_t n = 0;
    for (uint32_t k = 0; k < s->n && n < (uint32_t)st->max_depth; k++) {
      const struct ruby_frame *f = &st->frames.v[st->stacks.ids[s->off + k]];
      frames[n++] = (struct pp_frame){
          .name = ruby_strings_get(&st->strings, f->name),
          .file = f->file == RUBY_NO_ID ? NULL : ruby_strings_get(&st->strings, f->file),
          .line = f->line,
          .kind = f->kind};
    }
    struct pp_sample smp = {.pid = s->pid, .frames = frames, .nframes = n, .count = s->count};
    h->emit(sink, &smp);
  }
  for (size_t i = 0; i < st->ntargets;) {
    struct ruby_target *t = &st->targets[i];
    if (t->state == RUBY_T_GONE) {
      st->c_gone++;
      ruby_target_release(st, t);
      st->targets[i] = st->targets[--st->ntargets];
      continue;
    }
    target_extras(st, sink, t);
    i++;
  }
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
  if (st->c_full)
    RUBY_LOG(st, PP_LOG_WARNING, "tables full: %llu samples dropped (max_stacks / cache_size)",
             (unsigned long long)st->c_full);
  st->c_samples = st->c_torn = st->c_full = st->c_truncated = st->c_str_fail = 0;
  st->c_idle = st->c_gone = st->c_ticks = st->c_wakeups = st->c_alarms = st->c_pauses = 0;
  st->c_guess_hits = 0;
  ruby_stacks_clear(&st->stacks);
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
  pthread_mutex_lock(&st->lock);
  int rc = snapshot_locked(st, sink);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int ruby_stop(void *state) {
  struct ruby_state *st = state;
  ruby_sampler_stop(st);
  for (size_t i = 0; i < st->ntargets; i++)
    ruby_target_release(st, &st->targets[i]);
  st->ntargets = 0;
  if (st->epfd >= 0) close(st->epfd);
  if (st->wakefd >= 0) close(st->wakefd);
  st->epfd = st->wakefd = -1;
  return 0;
}

static void ruby_fini(void *state) {
  struct ruby_state *st = state;
  if (!st) return;
  ruby_stop(st);
  free(st->targets);
  free(st->cfp_buf);
  free(st->ids);
  free(st->eps);
  free(st->misses);
  ruby_strings_free(&st->strings);
  ruby_frames_free(&st->frames);
  ruby_cache_free(&st->iseq_cache);
  ruby_cache_free(&st->cfunc_cache);
  ruby_iseqs_free(&st->iseqs);
  ruby_stacks_free(&st->stacks);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "ruby",
    .version = "0.1.0",
    .description = "Ruby stacks read from outside the process (rbspy-compatible frames)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE | PP_CAP_ARCH_X86_64,
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
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
