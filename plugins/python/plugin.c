/*
 * polyprof python plugin: the descriptor, options, modes and the sampling
 * loop (see python.h for the map of the other files).
 *
 * Each tick samples every located target once: every interpreter and
 * thread is read with process_vm_readv while the target runs (or, with
 * python.blocking, while its threads are held by PTRACE_INTERRUPT). Modes,
 * as in CPython's profiling.sampling:
 *   cpu  (default) only threads whose /proc/PID/task/TID/stat state is R,
 *        so merged profiles mean CPU time; "auto", "pyspy", "py-spy" and
 *        "pyperf" (gProfiler's values) are accepted as cpu
 *   wall every thread, every sample
 *   gil  only the thread that holds the GIL
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "python.h"
#include "polyprof/kit/proc.h"

#define MAX_STAT_FDS 64 /* cached /proc/.../stat fds per target */
#define LOCATE_RETRY_NS 250000000ull
#define LOCATE_ATTEMPTS 12          /* ~3 s for an interpreter to start */
#define CHECK_NS 1000000000ull      /* identity check (exit, exec, pid reuse) */
#define FAILED_CHECK_NS 20000000ull /* after a failed sample, at most this often */
#define MAX_FREEZE 1024             /* threads held in blocking mode */

enum tstatus { T_PENDING, T_READY, T_SKIPPED, T_IGNORED, T_GONE };

struct stat_fd {
  uint32_t tid;
  int fd;
  uint32_t used; /* sample number of its last use */
};

struct target {
  uint32_t pid;
  uint64_t start_time;
  enum tstatus status;
  struct py_proc proc;
  char why[160];
  uint32_t attempts;
  uint64_t next_try_ns, next_check_ns, last_check_ns;
  struct py_image_id image; /* of the image located (read before locating) */
  /* this session */
  uint64_t samples, failed, missed, stacks, idle;
  bool skip_reported;
  struct stat_fd fds[MAX_STAT_FDS];
  uint32_t nfds, sample_no;
  /* pid namespace: ns tid -> host tid */
  uint32_t ns_map[256][2];
  uint32_t nns;
  uint64_t ns_rebuilt_ns;
  /* blocking + cpu: states read before the threads were held */
  uint32_t *pre_tids;
  char *pre_states;
  uint32_t npre;
};

struct state {
  const struct pp_host *host;
  enum py_thread_filter filter;
  bool blocking;
  int64_t frequency, cache_size, max_depth, max_stacks;
  uint64_t interval_ns, due_ns; /* due_ns: when the next sample is due */
  struct target **targets;
  size_t ntargets, cap;
  struct py_codecache *cc;
  struct py_walker *walker;
  struct py_agg *agg;
  struct target *cur; /* target being sampled (callbacks) */
  uint64_t now_ns;
  uint64_t dropped_total;
};

#define LOG(st, lvl, ...) (st)->host->log((st)->host, (lvl), __VA_ARGS__)

static const char *const mode_choices[] = {"cpu",   "wall",   "gil",    "auto",
                                           "pyspy", "py-spy", "pyperf", NULL};
static const char *const exe_patterns[] = {"python*", "uwsgi",   "gunicorn*",
                                           "celery",  "uvicorn", NULL};
static const char *const map_patterns[] = {"libpython*.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .choices = mode_choices,
     .default_value = "cpu",
     .help = "cpu: running threads only; wall: every thread; gil: the GIL holder "
             "(auto/pyspy/py-spy/pyperf = cpu)"},
    {.key = "frequency",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 10000,
     .help = "samples per second per process; 0: the session frequency (10 kHz max)"},
    {.key = "blocking",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "hold the target's threads (ptrace) while reading, for exact stacks"},
    {.key = "code_cache_size",
     .type = PP_OPT_INT,
     .default_value = "8192",
     .min = 64,
     .max = 1 << 20,
     .help = "code objects cached (name, file, line table), all targets"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "1024",
     .min = 1,
     .max = PY_MAX_DEPTH_LIMIT,
     .help = "frames kept per stack (deeper: [Truncated Stack])"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "65536",
     .min = 256,
     .max = 1 << 22,
     .help = "distinct stacks kept per session (more: counted as dropped)"},
};

/* ---- /proc thread states ---------------------------------------------- */

static char read_state_fd(int fd) {
  char buf[512];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *rp = strrchr(buf, ')'); /* comm may hold ')' */
  if (!rp || rp[1] != ' ') return 0;
  return rp[2];
}

static void close_fd_slot(struct target *t, uint32_t i) {
  close(t->fds[i].fd);
  t->fds[i] = t->fds[--t->nfds];
}

static void close_all_fds(struct target *t) {
  while (t->nfds)
    close_fd_slot(t, 0);
}

/* State of a host tid: pread on a kept-open stat file costs one system
 * call instead of three; the number of kept files is bounded. */
static char thread_state(struct target *t, uint32_t tid) {
  for (uint32_t i = 0; i < t->nfds; i++) {
    if (t->fds[i].tid != tid) continue;
    char s = read_state_fd(t->fds[i].fd);
    if (s) {
      t->fds[i].used = t->sample_no;
      return s;
    }
    close_fd_slot(t, i); /* thread gone */
    return 0;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", t->pid, tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char s = read_state_fd(fd);
  if (!s) {
    close(fd);
    return 0;
  }
  if (t->nfds == MAX_STAT_FDS) { /* evict the least recently used */
    uint32_t old = 0;
    for (uint32_t i = 1; i < t->nfds; i++)
      if (t->fds[i].used < t->fds[old].used) old = i;
    close_fd_slot(t, old);
  }
  t->fds[t->nfds++] = (struct stat_fd){tid, fd, t->sample_no};
  return s;
}

/* Namespace tid -> host tid, from NSpid of every task (rebuilt at most
 * every 100 ms, when a tid is unknown). */
static uint32_t host_tid(struct state *st, struct target *t, uint32_t ns_tid) {
  if (t->proc.ns_pid == t->pid || ns_tid == 0) return ns_tid;
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < t->nns; i++)
      if (t->ns_map[i][0] == ns_tid) return t->ns_map[i][1];
    if (pass || st->now_ns - t->ns_rebuilt_ns < 100000000ull) break;
    t->ns_rebuilt_ns = st->now_ns;
    t->nns = 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/task", t->pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d)) && t->nns < 256) {
      if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
      char sp[300], buf[2048];
      snprintf(sp, sizeof(sp), "/proc/%u/task/%.32s/status", t->pid, de->d_name);
      if (pp_read_file(sp, buf, sizeof(buf), NULL) < 0) continue;
      char *ns = strstr(buf, "NSpid:");
      if (!ns) continue;
      char *nl = strchr(ns, '\n');
      if (nl) *nl = '\0';
      char *last = strrchr(ns, '\t');
      if (!last) continue;
      t->ns_map[t->nns][0] = (uint32_t)strtoul(last + 1, NULL, 10);
      t->ns_map[t->nns][1] = (uint32_t)strtoul(de->d_name, NULL, 10);
      t->nns++;
    }
    closedir(d);
  }
  return 0;
}

static bool pred_running(void *ctx, uint32_t ns_tid) {
  struct state *st = ctx;
  struct target *t = st->cur;
  uint32_t tid = host_tid(st, t, ns_tid);
  if (!tid) return true; /* unknown tid (py-spy does the same): count it */
  if (t->npre) {         /* blocking: threads are stopped now, use the states from before */
    for (uint32_t i = 0; i < t->npre; i++)
      if (t->pre_tids[i] == tid) return t->pre_states[i] == 'R';
    return false;
  }
  char s = thread_state(t, tid);
  if (s != 'R') t->idle++;
  return s == 'R';
}

static void on_stack(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t n,
                     bool truncated) {
  (void)tid;
  struct state *st = ctx;
  if (python_agg_add(st->agg, st->cur->pid, frames, n, truncated)) st->cur->stacks++;
}

/* ---- blocking mode ------------------------------------------------------ */

/* A thread held in blocking mode, and the signal to hand back on detach
 * (one that arrived while we were stopping it). */
struct held {
  uint32_t tid;
  int sig;
};

/* Holds every thread of t with PTRACE_SEIZE + PTRACE_INTERRUPT (no signal
 * is sent to the target). Returns how many were held. */
static uint32_t freeze(struct state *st, struct target *t, struct held *held) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", t->pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  uint32_t n = 0;
  t->npre = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < MAX_FREEZE && t->npre < MAX_FREEZE) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
    if (st->filter == PY_RUNNING_THREADS) { /* a held thread reads 't' */
      t->pre_tids[t->npre] = tid;
      t->pre_states[t->npre++] = thread_state(t, tid);
    }
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) continue;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
      ptrace(PTRACE_DETACH, tid, 0, 0);
      continue;
    }
    int status;
    if (waitpid((pid_t)tid, &status, __WALL) < 0) {
      ptrace(PTRACE_DETACH, tid, 0, 0);
      continue;
    }
    held[n].tid = tid;
    held[n].sig = WIFSTOPPED(status) && (status >> 16) != PTRACE_EVENT_STOP ? WSTOPSIG(status) : 0;
    n++;
  }
  closedir(d);
  return n;
}

static void thaw(const struct held *held, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    ptrace(PTRACE_DETACH, held[i].tid, 0, (void *)(uintptr_t)held[i].sig);
}

/* ---- targets ------------------------------------------------------------ */

/* A target that exited stays until the snapshot, so its last stacks are
 * emitted; its threads' stat files are of no use any more and go now (under
 * churn they were a dozen descriptors of dead processes before each
 * snapshot). */
static void mark_gone(struct target *t) {
  t->status = T_GONE;
  close_all_fds(t);
}

static void reset_target(struct state *st, struct target *t) {
  close_all_fds(t);
  python_codecache_forget_pid(st->cc, t->pid);
  t->status = T_PENDING;
  t->attempts = 0;
  t->next_try_ns = 0;
  t->skip_reported = false;
  t->nns = 0;
}

static void try_locate(struct state *st, struct target *t) {
  t->attempts++;
  /* read first: an exec during the locate then shows as a changed image */
  int rc = python_image_id(t->pid, &t->image);
  if (rc == 0) rc = python_locate(t->pid, &t->proc, t->why, sizeof(t->why));
  if (rc == 0) {
    t->status = T_READY;
    t->next_check_ns = st->now_ns + CHECK_NS;
    if (!t->proc.off.ts_native_tid && st->filter == PY_RUNNING_THREADS &&
        python_discover_tid_offset(&t->proc) < 0)
      LOG(st, PP_LOG_INFO,
          "pid %u: thread ids not found (pthread scan); all threads counted as running", t->pid);
    LOG(st, PP_LOG_INFO, "pid %u: Python %s in %s", t->pid, t->proc.version, t->proc.module);
    return;
  }
  if (rc == -ENOTSUP) {
    t->status = T_SKIPPED;
    LOG(st, PP_LOG_WARNING, "pid %u: %s: not profiled", t->pid, t->why);
    return;
  }
  if (rc == -ESRCH) {
    mark_gone(t);
    return;
  }
  if (t->attempts >= LOCATE_ATTEMPTS) {
    t->status = T_IGNORED;
    LOG(st, PP_LOG_INFO, "pid %u: no CPython interpreter found (%s); ignored", t->pid,
        strerror(-rc));
    return;
  }
  t->next_try_ns = st->now_ns + LOCATE_RETRY_NS;
}

/* Once a second, after a failed sample, and when the core hands the pid
 * over again: did the process exit, get its pid reused, or exec a new
 * image? After an exec every address held (anchors, offsets, cached code
 * objects) belongs to the old image: all of it is dropped and the process
 * is located again. */
static void check_identity(struct state *st, struct target *t) {
  t->next_check_ns = st->now_ns + CHECK_NS;
  t->last_check_ns = st->now_ns;
  struct py_image_id now;
  if (python_image_id(t->pid, &now) < 0 || now.start_time != t->start_time) {
    LOG(st, PP_LOG_INFO, "pid %u: exited; stopped sampling it", t->pid);
    mark_gone(t);
    return;
  }
  if (!python_image_same(&now, &t->image)) {
    LOG(st, PP_LOG_INFO,
        "pid %u: exec'd a new program image (was Python %s in %s); its state is dropped, "
        "looking for Python again",
        t->pid, t->proc.version, t->proc.module);
    reset_target(st, t);
  }
}

static void sample_target(struct state *st, struct target *t) {
  static struct held held_buf[MAX_FREEZE]; /* tick() never runs concurrently */
  uint32_t held = 0;
  t->sample_no++;
  if (st->blocking) held = freeze(st, t, held_buf);
  struct py_sample_result res;
  st->cur = t;
  int rc =
      python_sample(st->walker, &t->proc, st->cc, st->filter, pred_running, on_stack, st, &res);
  if (held) thaw(held_buf, held);
  t->npre = 0;
  t->samples++;
  if (rc < 0 || res.failed) {
    t->failed++;
    if (rc == -ESRCH) {
      LOG(st, PP_LOG_INFO, "pid %u: exited; stopped sampling it", t->pid);
      mark_gone(t);
    } else if (st->now_ns - t->last_check_ns >= FAILED_CHECK_NS) {
      /* the usual cause of a sample that cannot be read is an exec: find
       * out now rather than fail every sample until the periodic check */
      check_identity(st, t);
    }
  }
}

static int py_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->frequency = 0, st->cache_size = 8192, st->max_depth = 1024, st->max_stacks = 65536;
  int b = 0;
  if (host->config_bool(host, "blocking", &b) == 0) st->blocking = b;
  host->config_int(host, "frequency", &st->frequency);
  host->config_int(host, "code_cache_size", &st->cache_size);
  host->config_int(host, "max_depth", &st->max_depth);
  host->config_int(host, "max_stacks", &st->max_stacks);
  if (st->max_depth < 1 || st->max_depth > PY_MAX_DEPTH_LIMIT) st->max_depth = 1024;
  st->cc = python_codecache_new((size_t)st->cache_size);
  st->walker = python_walker_new((uint32_t)st->max_depth);
  /* frames: room for every stack at a typical depth; strings: names+files */
  size_t max_frames =
      (size_t)st->max_stacks * 64 < (8u << 20) ? (size_t)st->max_stacks * 64 : (8u << 20);
  st->agg = python_agg_new((size_t)st->max_stacks, max_frames, 16u << 20);
  if (!st->cc || !st->walker || !st->agg) {
    python_codecache_free(st->cc);
    python_walker_free(st->walker);
    python_agg_free(st->agg);
    free(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int py_start(void *state, struct pp_session *session) {
  struct state *st = state;
  const char *m = session->mode ? session->mode : "cpu";
  st->filter = strcmp(m, "wall") == 0  ? PY_ALL_THREADS
               : strcmp(m, "gil") == 0 ? PY_GIL_THREAD
                                       : PY_RUNNING_THREADS;
  if (st->frequency > 0) session->tick_interval_ns = 1000000000ull / (uint64_t)st->frequency;
  if (!session->tick_interval_ns) session->tick_interval_ns = 1000000000ull / 11;
  st->interval_ns = session->tick_interval_ns;
  st->due_ns = 0;
  /* At kHz rates the default 50 us timer slack of the thread that calls
   * tick() (ours: start() runs on it) would eat a third of each interval. */
  if (st->interval_ns < 2000000) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  LOG(st, PP_LOG_INFO, "sampling Python processes at %.0f Hz (mode %s%s%s)",
      1e9 / (double)st->interval_ns, m,
      st->filter == PY_RUNNING_THREADS && strcmp(m, "cpu") ? " = cpu" : "",
      st->blocking ? ", blocking" : "");
  return 0;
}

static int py_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct state *st = state;
  for (size_t i = 0; i < n; i++) {
    struct target *t = NULL;
    for (size_t j = 0; j < st->ntargets; j++)
      if (st->targets[j]->pid == tg[i].pid) t = st->targets[j];
    if (t) {
      /* the same process again: known, unless we had found no interpreter
       * in it and the core hands it over anew (it exec'd: look again) */
      bool same =
          t->start_time == tg[i].start_time && t->status != T_GONE && t->status != T_IGNORED;
      if (same && t->status == T_SKIPPED) {
        /* refused (say, a version we cannot read): exec'd into another? */
        struct py_image_id now;
        same = python_image_id(t->pid, &now) < 0 || python_image_same(&now, &t->image);
      }
      if (same) {
        t->next_check_ns = 0; /* the core saw an exec? check at the next tick */
        continue;
      }
      reset_target(st, t); /* pid reused, or a new image to look at */
    } else {
      if (st->ntargets == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 32;
        struct target **g = realloc(st->targets, nc * sizeof(*g));
        if (!g) return -ENOMEM;
        st->targets = g;
        st->cap = nc;
      }
      t = calloc(1, sizeof(*t));
      if (!t) return -ENOMEM;
      /* only blocking mode holds threads: 5 KiB a target otherwise unused */
      if (st->blocking) {
        t->pre_tids = calloc(MAX_FREEZE, sizeof(*t->pre_tids));
        t->pre_states = calloc(MAX_FREEZE, 1);
      }
      if (st->blocking && (!t->pre_tids || !t->pre_states)) {
        free(t->pre_tids);
        free(t->pre_states);
        free(t);
        return -ENOMEM;
      }
      st->targets[st->ntargets++] = t;
    }
    t->pid = tg[i].pid;
    t->start_time = tg[i].start_time;
    t->status = T_PENDING;
    t->attempts = 0;
    t->next_try_ns = 0;
  }
  return 0;
}

static void sample_round(struct state *st, uint64_t missed) {
  for (size_t i = 0; i < st->ntargets; i++) {
    struct target *t = st->targets[i];
    if (t->status != T_READY) continue;
    t->missed += missed;
    sample_target(st, t);
  }
}

/* The host calls tick() at the plugin's rate but drops its phase after a
 * late tick (it never bursts), and on a busy machine the wake-up after
 * each 100 us timer is often late: at 10 kHz that lost 3-30% of the
 * samples. The plugin keeps its own schedule (due_ns) instead: a tick that
 * finds the schedule one interval or more behind takes one extra sample
 * (at most CATCHUP_PER_TICK in all), so short delays are made up; a stall
 * longer than CATCHUP_MAX intervals is dropped and counted as missed. */
#define CATCHUP_PER_TICK 2
#define CATCHUP_MAX 4

static int py_tick(void *state, uint64_t now) {
  struct state *st = state;
  st->now_ns = now;
  uint64_t missed = 0, iv = st->interval_ns;
  if (!st->due_ns || now > st->due_ns + CATCHUP_MAX * iv) {
    if (st->due_ns) missed = (now - st->due_ns) / iv; /* samples given up */
    st->due_ns = now;
  }
  int locates = 0; /* a burst of new processes must not stall sampling */
  for (size_t i = 0; i < st->ntargets; i++) {
    struct target *t = st->targets[i];
    if (t->status == T_PENDING && now >= t->next_try_ns && locates++ < 8) try_locate(st, t);
    if (t->status == T_READY && now >= t->next_check_ns) check_identity(st, t);
  }
  /* the host decides when a tick happens: always one sample */
  for (int round = 0; round < CATCHUP_PER_TICK; round++) {
    sample_round(st, round == 0 ? missed : 0);
    st->due_ns += iv;
    if (st->due_ns > now) break;
  }
  if (st->due_ns > now + iv) st->due_ns = now + iv; /* never run ahead of the host */
  return 0;
}

static int py_snapshot(void *state, struct pp_sink *sink) {
  struct state *st = state;
  const struct pp_host *h = st->host;
  python_agg_emit(st->agg, h, sink);
  uint64_t samples = 0, failed = 0, missed = 0;
  for (size_t i = 0; i < st->ntargets; i++) {
    struct target *t = st->targets[i];
    samples += t->samples, failed += t->failed, missed += t->missed;
    if (t->status == T_READY || (t->status == T_GONE && t->samples)) {
      char meta[96];
      snprintf(meta, sizeof(meta), "{\"python_version\": \"Python %s\"}", t->proc.version);
      h->set_app_metadata(sink, t->pid, meta);
    }
    if (t->status == T_SKIPPED) h->set_pid_status(sink, t->pid, PP_PID_SKIPPED, t->why);
    if (t->samples) {
      /* sampling efficiency per process, as profiling.sampling reports it */
      double eff = 100.0 * (double)(t->samples - t->failed) / (double)(t->samples + t->missed);
      LOG(st,
          t->failed * 20 > t->samples || t->missed * 20 > t->samples ? PP_LOG_INFO : PP_LOG_DEBUG,
          "pid %u: %llu samples, %llu failed, %llu missed (efficiency %.1f%%), %llu stacks", t->pid,
          (unsigned long long)t->samples, (unsigned long long)t->failed,
          (unsigned long long)t->missed, eff, (unsigned long long)t->stacks);
    }
    t->samples = t->failed = t->missed = t->stacks = t->idle = 0;
    t->proc.ntids = 0;
  }
  uint64_t hits, misses, evictions;
  python_codecache_stats(st->cc, &hits, &misses, &evictions);
  h->add_counter(sink, "samples", samples);
  h->add_counter(sink, "failed_samples", failed);
  h->add_counter(sink, "missed_samples", missed);
  h->add_counter(sink, "dropped_stacks", python_agg_dropped(st->agg));
  h->add_counter(sink, "code_cache_misses", misses);
  h->add_counter(sink, "code_cache_evictions", evictions);
  /* forget processes that are gone; their last stacks were emitted above */
  for (size_t i = 0; i < st->ntargets;) {
    struct target *t = st->targets[i];
    if (t->status == T_GONE) { /* its stat files went with the exit (mark_gone) */
      python_codecache_forget_pid(st->cc, t->pid);
      free(t->pre_tids);
      free(t->pre_states);
      free(t);
      st->targets[i] = st->targets[--st->ntargets];
      continue;
    }
    i++;
  }
  python_codecache_new_gen(st->cc);
  return 0;
}

static int py_stop(void *state) {
  struct state *st = state;
  for (size_t i = 0; i < st->ntargets; i++) {
    close_all_fds(st->targets[i]);
    free(st->targets[i]->pre_tids);
    free(st->targets[i]->pre_states);
    free(st->targets[i]);
  }
  st->ntargets = 0;
  return 0;
}

static void py_fini(void *state) {
  struct state *st = state;
  if (!st) return;
  py_stop(st);
  free(st->targets);
  python_codecache_free(st->cc);
  python_walker_free(st->walker);
  python_agg_free(st->agg);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "python",
    .version = "0.1.0",
    .description =
        "CPython 2.7 and 3.6-3.13 stacks read from outside the process (3.14: "
        "implemented from the reference, tested on a synthetic image only)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE | PP_CAP_ARCH_X86_64 |
                    PP_CAP_ARCH_AARCH64,
    .match_exe = exe_patterns,
    .match_maps = map_patterns,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = py_init,
    .start = py_start,
    .add_targets = py_add_targets,
    .tick = py_tick,
    .snapshot = py_snapshot,
    .stop = py_stop,
    .fini = py_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
