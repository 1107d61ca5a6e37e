/*
 * polyprof ruby plugin: Ruby call stacks read from outside the process, as
 * rbspy does (reference php-ruby-remote.md §3-§6), without stopping the
 * target. Each tick samples every Ruby thread that is on a CPU; stacks are
 * aggregated in bounded tables and handed over at snapshot, where they
 * replace perf's native stacks of the same pids.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ruby.h"
#include "support/proc.h"
#include "support/remote.h"

static const char *const mode_choices[] = {"rbspy", NULL};
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
     .help = "sample only Ruby threads running now that ran since the last tick (rbspy --oncpu)"},
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
    {.key = "c_function_names",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "name C methods ('sort_by [c function]') through Ruby's symbol table"},
};

#define ATTACH_RETRY_NS 200000000ull
#define THREADS_REFRESH_NS 500000000ull
#define IDENTITY_CHECK_NS 1000000000ull

static int ruby_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct ruby_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  int b = 1;
  st->oncpu = host->config_bool(host, "oncpu", &b) == 0 ? b : 1;
  b = 1;
  st->cfunc_names = host->config_bool(host, "c_function_names", &b) == 0 ? b : 1;
  st->max_depth = 2048;
  st->max_threads = 64;
  st->cache_size = 16384;
  st->max_stacks = 16384;
  st->attach_retries = 25;
  host->config_int(host, "max_depth", &st->max_depth);
  host->config_int(host, "max_threads", &st->max_threads);
  host->config_int(host, "cache_size", &st->cache_size);
  host->config_int(host, "max_stacks", &st->max_stacks);
  host->config_int(host, "attach_retries", &st->attach_retries);
  size_t cache = (size_t)st->cache_size;
  int rc = 0;
  rc |= ruby_strings_init(&st->strings, cache * 96);
  rc |= ruby_frames_init(&st->frames, cache * 2);
  rc |= ruby_cache_init(&st->iseq_cache, cache);
  rc |= ruby_cache_init(&st->cfunc_cache, cache / 4 + 64);
  rc |= ruby_stacks_init(&st->stacks, (size_t)st->max_stacks, (size_t)st->max_stacks * 64);
  st->cfp_buf = malloc((size_t)st->max_depth * 64);
  st->ids = malloc(((size_t)st->max_depth + 1) * sizeof(*st->ids));
  st->eps = malloc(((size_t)st->max_depth + 1) * sizeof(*st->eps));
  if (rc || !st->cfp_buf || !st->ids || !st->eps) {
    free(st->cfp_buf);
    free(st->ids);
    free(st->eps);
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
  session->tick_interval_ns = 1000000000ull / (uint64_t)freq;
  add_fixed_frames(st);
  RUBY_LOG(st, PP_LOG_INFO, "sampling Ruby stacks at %lld Hz (%s threads, max depth %lld)",
           (long long)freq, st->oncpu ? "running" : "all", (long long)st->max_depth);
  return 0;
}

static void target_release(struct ruby_state *st, struct ruby_target *t) {
  ruby_threads_close(t);
  free(t->threads);
  t->threads = NULL;
  ruby_cache_forget_pid(&st->iseq_cache, t->pid);
  ruby_cache_forget_pid(&st->cfunc_cache, t->pid);
}

static int ruby_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct ruby_state *st = state;
  for (size_t i = 0; i < n; i++) {
    size_t j;
    for (j = 0; j < st->ntargets; j++)
      if (st->targets[j].pid == tg[i].pid) break;
    if (j < st->ntargets) {
      if (st->targets[j].start_time == tg[i].start_time) continue;
      target_release(st, &st->targets[j]); /* pid reused by a new process */
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
    if (pp_proc_ns_pid(t->pid, &t->ns_pid) < 0) t->ns_pid = t->pid;
  }
  return 0;
}

static void try_attach(struct ruby_state *st, struct ruby_target *t) {
  if (st->now_ns < t->next_attach_ns) return;
  int rc = ruby_attach(st, t);
  if (rc == 0) {
    t->state = RUBY_T_OK;
  } else if (rc == -ENOTSUP) {
    t->state = RUBY_T_SKIPPED;
    RUBY_LOG(st, PP_LOG_INFO, "pid %u: %s", t->pid, t->reason);
  } else if (rc == -ESRCH) {
    t->state = RUBY_T_GONE;
  } else if (rc == -EAGAIN && t->attach_tries < st->attach_retries) {
    t->next_attach_ns = st->now_ns + ATTACH_RETRY_NS;
  } else {
    if (rc != -EAGAIN || !t->reason[0])
      snprintf(t->reason, sizeof(t->reason), "cannot attach: %s", strerror(-rc));
    t->state = RUBY_T_ERROR;
    RUBY_LOG(st, PP_LOG_WARNING, "pid %u: %s", t->pid, t->reason);
  }
}

static bool still_there(struct ruby_state *st, struct ruby_target *t) {
  uint64_t start = 0;
  char state = '?';
  /* a zombie keeps its pid and start time until reaped, but has no memory
   * left to read: it is gone for us */
  if (st->host->proc_start_time(st->host, t->pid, &start) < 0 || start != t->start_time ||
      (pp_proc_state(t->pid, 0, &state) == 0 && (state == 'Z' || state == 'X'))) {
    t->state = RUBY_T_GONE;
    ruby_threads_close(t);
    return false;
  }
  return true;
}

/* Walks one EC and counts its stack. False if the read was torn. */
static bool record(struct ruby_state *st, struct ruby_target *t, uint64_t ec) {
  bool truncated = false;
  int n = ruby_walk(st, t, ec, &truncated);
  if (n == -ESRCH) {
    still_there(st, t);
    return true;
  }
  if (n == -ENOSPC) {
    st->c_full++;
    return true;
  }
  if (n < 0) {
    st->c_torn++;
    t->torn++;
    return false;
  }
  if (truncated) st->c_truncated++;
  if (n == 0) return true;
  if (ruby_stacks_add(&st->stacks, t->pid, st->ids, (uint32_t)n, 1) < 0) {
    st->c_full++;
    return true;
  }
  st->c_samples++;
  t->samples++;
  return true;
}

/* CPU time of the whole process (all threads) in ns, from its CPU clock:
 * one cheap system call, no /proc text to format. 0 if unavailable. */
static uint64_t process_cpu_ns(uint32_t pid) {
  /* MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's ABI */
  clockid_t cid = (clockid_t)((~(unsigned)pid << 3) | 2u);
  struct timespec ts;
  if (clock_gettime(cid, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sample_target(struct ruby_state *st, struct ruby_target *t) {
  const struct ruby_layout *L = t->L;
  if (st->now_ns - t->threads_at_ns >= THREADS_REFRESH_NS) {
    if (!still_there(st, t)) return;
    ruby_threads_refresh(st, t);
  }
  if (st->oncpu) {
    /* no thread of the process ran since the last tick: nothing moved,
     * skip the per-thread checks (most targets, most ticks, on a busy box
     * or for idle servers) */
    uint64_t cpu = process_cpu_ns(t->pid);
    if (cpu && cpu == t->cpu_ns) {
      st->c_idle++;
      t->idle++;
      return;
    }
    t->cpu_ns = cpu;
  }
  if (t->per_thread) {
    bool any = false;
    for (uint32_t i = 0; i < t->nthreads && t->state == RUBY_T_OK; i++) {
      struct ruby_thread *th = &t->threads[i];
      if (st->oncpu && !ruby_thread_on_cpu(t, th)) continue;
      uint64_t ec = 0;
      int rc = pp_remote_read((pid_t)t->pid, th->addr + L->thread_ec, &ec, sizeof(ec));
      if (rc == -ESRCH) {
        still_there(st, t);
        return;
      }
      if (rc < 0 || !ec) {
        st->c_torn++;
        t->threads_at_ns = 0; /* the thread may be gone: re-read the list */
        continue;
      }
      any = true;
      if (!record(st, t, ec)) t->threads_at_ns = 0;
    }
    if (!any) {
      st->c_idle++;
      t->idle++;
    }
    return;
  }
  /* rbspy's way: the thread holding (or last holding) the GVL */
  if (st->oncpu && !ruby_any_task_running(t->pid)) {
    st->c_idle++;
    t->idle++;
    return;
  }
  uint64_t ec = 0;
  uint64_t at = t->main_ractor ? t->main_ractor + (uint64_t)t->running_ec_off : t->ec_ptr_addr;
  int rc = at ? pp_remote_read((pid_t)t->pid, at, &ec, sizeof(ec)) : -ENOENT;
  if (rc == -ESRCH) {
    still_there(st, t);
    return;
  }
  if (rc < 0 || !ec) {
    st->c_torn++;
    return;
  }
  record(st, t, ec);
}

static int ruby_tick(void *state, uint64_t now_ns) {
  struct ruby_state *st = state;
  st->now_ns = now_ns;
  st->c_ticks++;
  for (size_t i = 0; i < st->ntargets; i++) {
    struct ruby_target *t = &st->targets[i];
    if (t->state == RUBY_T_NEW) try_attach(st, t);
    if (t->state == RUBY_T_OK) sample_target(st, t);
  }
  return 0;
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

static int ruby_snapshot(void *state, struct pp_sink *sink) {
  struct ruby_state *st = state;
  const struct pp_host *h = st->host;
  struct pp_frame *frames = (struct pp_frame *)st->cfp_buf; /* max_depth*64 bytes >= frames */
  for (size_t i = 0; i < st->stacks.cap; i++) {
    const struct ruby_stack *s = &st->stacks.v[i];
    if (!s->used) continue;
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
      target_release(st, t);
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
  if (st->c_full)
    RUBY_LOG(st, PP_LOG_WARNING, "tables full: %llu samples dropped (max_stacks / cache_size)",
             (unsigned long long)st->c_full);
  st->c_samples = st->c_torn = st->c_full = st->c_truncated = st->c_str_fail = 0;
  st->c_idle = st->c_gone = st->c_ticks = 0;
  ruby_stacks_clear(&st->stacks);
  /* method entries can be freed and reused by another method: forget them
   * every session; and start over when the frame tables are half full so a
   * long run never fills them */
  ruby_cache_clear(&st->cfunc_cache);
  if (st->frames.n * 2 > st->frames.cap || st->strings.arena_used * 2 > st->strings.arena_cap) {
    ruby_frames_clear(&st->frames);
    ruby_strings_clear(&st->strings);
    ruby_cache_clear(&st->iseq_cache);
    add_fixed_frames(st);
  }
  return 0;
}

static int ruby_stop(void *state) {
  struct ruby_state *st = state;
  for (size_t i = 0; i < st->ntargets; i++)
    target_release(st, &st->targets[i]);
  st->ntargets = 0;
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
  ruby_strings_free(&st->strings);
  ruby_frames_free(&st->frames);
  ruby_cache_free(&st->iseq_cache);
  ruby_cache_free(&st->cfunc_cache);
  ruby_stacks_free(&st->stacks);
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
    .tick = ruby_tick,
    .snapshot = ruby_snapshot,
    .stop = ruby_stop,
    .fini = ruby_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
