/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampling loop: each tick samples every attached target once: every
 * interpreter and thread is read with process_vm_readv while the target
 * runs (or, with python.blocking, while its threads are held by
 * PTRACE_INTERRUPT). Modes, as in CPython's profiling.sampling:
 *   cpu  (default) only threads whose /proc/PID/task/TID/stat state is R,
 *        so merged profiles mean CPU time; "auto", "pyspy", "py-spy" and
 *        "pyperf" (gProfiler's values) are accepted as cpu
 *   wall every thread, every sample
 *   gil  only the thread that holds the GIL
 * Stacks go into the kit's stack table, counted until the snapshot.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "native.h"
#include "polyprof/kit/cpu_switches.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "python.h"

#define FAILED_CHECK_NS 20000000ull /* after a failed sample, at most this often */

/* Namespace tid -> host tid, from NSpid of every task (rebuilt at most
 * every 100 ms, when a tid is unknown). /proc/PID/task is the kernel's,
 * not a file in the target's root. */
static uint32_t host_tid(struct py_state *st, struct py_target *pt, uint32_t pid, uint32_t ns_tid) {
  if (pt->proc.ns_pid == pid || ns_tid == 0) return ns_tid;
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < pt->nns; i++)
      if (pt->ns_map[i][0] == ns_tid) return pt->ns_map[i][1];
    if (pass || st->now_ns - pt->ns_rebuilt_ns < 100000000ull) break;
    pt->ns_rebuilt_ns = st->now_ns;
    pt->nns = 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/task", pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d)) && pt->nns < PY_NS_MAP) {
      if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
      char sp[300], buf[2048];
      snprintf(sp, sizeof(sp), "/proc/%u/task/%.32s/status", pid, de->d_name);
      if (pp_read_file(sp, buf, sizeof(buf), NULL) < 0) continue;
      char *ns = strstr(buf, "NSpid:");
      if (!ns) continue;
      char *nl = strchr(ns, '\n');
      if (nl) *nl = '\0';
      char *last = strrchr(ns, '\t');
      if (!last) continue;
      pt->ns_map[pt->nns][0] = (uint32_t)strtoul(last + 1, NULL, 10);
      pt->ns_map[pt->nns][1] = (uint32_t)strtoul(de->d_name, NULL, 10);
      pt->nns++;
    }
    closedir(d);
  }
  return 0;
}

uint32_t python_host_tid(struct py_state *st, struct pp_target_entry *t, uint32_t ns_tid) {
  return host_tid(st, t->data, t->pid, ns_tid);
}

/* State letter of a host thread of the current target, 0 if gone. */
static char thread_state(struct py_state *st, uint32_t tid) {
  struct py_target *pt = st->cur->data;
  if (!pt->cpu) pt->cpu = pp_thread_cpu_new(st->cur->pid, 64);
  return pt->cpu ? pp_thread_cpu_state(pt->cpu, tid) : 'R';
}

static bool pred_running(void *ctx, uint32_t ns_tid) {
  struct py_state *st = ctx;
  struct py_target *pt = st->cur->data;
  uint32_t tid = host_tid(st, pt, st->cur->pid, ns_tid);
  if (!tid) {
    pt->tids_unknown = true; /* its threads are not all watched: never skip it */
    return true;             /* unknown tid (py-spy does the same): count it */
  }
  if (st->npre) { /* blocking: threads are stopped now, use the states from before */
    for (uint32_t i = 0; i < st->npre; i++)
      if (st->pre_tids[i] == tid) return st->pre_states[i] == 'R';
    return false;
  }
  char s = thread_state(st, tid);
  if (s != 'R') pt->idle++;
  return s == 'R';
}

/* --mode offcpu: is the thread of ns tid ns_tid not blocked? Runnable
 * threads (on a CPU or waiting for one) are not off-CPU; one whose host
 * tid is unknown is taken as running, as in cpu mode. */
static bool thread_running(struct py_state *st, uint32_t ns_tid) {
  struct py_target *pt = st->cur->data;
  uint32_t tid = host_tid(st, pt, st->cur->pid, ns_tid);
  if (!tid) return true;
  if (st->npre) { /* blocking: the states from before the threads were held */
    for (uint32_t i = 0; i < st->npre; i++)
      if (st->pre_tids[i] == tid) return st->pre_states[i] == 'R';
    return true;
  }
  char s = thread_state(st, tid);
  return s == 'R' || s == 0;
}

static void on_stack(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t n,
                     bool truncated) {
  struct py_state *st = ctx;
  if (n == 0 || n > st->max_depth + PY_EXTRA_FRAMES) return;
  for (uint32_t i = 0; i < n; i++)
    st->frames[i] = frames[i].code
                        ? (struct pp_frame){.name = frames[i].code->name,
                                            .file = frames[i].code->file,
                                            .line = frames[i].line,
                                            .kind = PP_FRAME_PYTHON}
                        : (struct pp_frame){.name = frames[i].pseudo, .kind = PP_FRAME_PSEUDO};
  /* the root side was cut off: say so, as PyPerf does */
  if (truncated)
    st->frames[n++] = (struct pp_frame){.name = "[Truncated Stack]", .kind = PP_FRAME_PYTHON_ERROR};
  if (st->dump_sink) {
    struct py_target *dpt = st->cur->data;
    struct pp_sample smp = {.pid = st->cur->pid,
                            .tid = host_tid(st, dpt, st->cur->pid, tid),
                            .comm = python_thread_name(st, tid),
                            .frames = st->frames,
                            .nframes = n,
                            .count = 1};
    st->host->emit(st->dump_sink, &smp);
    return;
  }
  char tframe[PY_THREAD_NAME_MAX + 16];
  const char *tname = st->thread_names ? python_thread_name(st, tid) : NULL;
  if (tname) {
    snprintf(tframe, sizeof(tframe), "<thread: %s>", tname);
    st->frames[n++] = (struct pp_frame){.name = tframe, .kind = PP_FRAME_PSEUDO};
  }
  struct py_target *pt = st->cur->data;
  bool running = !st->offcpu || thread_running(st, tid);
  if (st->untagged == PY_UNTAGGED_ALL || (running && st->untagged == PY_UNTAGGED_RUNNING)) {
    if (pp_stack_table_add(st->stacks, st->cur->pid, 0, NULL, st->frames, n, st->weight) == 0)
      pt->stacks++;
  }
  if (!running) {
    /* a blocked thread seen at a tick stands for the interval it is
     * sampled at: off-CPU time in microseconds, as the perf plugin's */
    uint64_t us = st->interval_ns / 1000 * st->weight;
    if (pp_stack_table_add_typed(st->stacks, PP_PROFILE_OFFCPU, st->cur->pid, 0, NULL, st->frames,
                                 n, us ? us : 1) == 0)
      pt->stacks++;
  }
}

/* ---- blocking mode ------------------------------------------------------ */

/* A thread held in blocking mode, and the signal to hand back on detach
 * (one that arrived while we were stopping it). */
struct held {
  uint32_t tid;
  int sig;
};

/* Holds every thread of the current target with PTRACE_SEIZE +
 * PTRACE_INTERRUPT (no signal is sent to the target). Returns how many
 * were held. */
static uint32_t freeze(struct py_state *st, struct held *held) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", st->cur->pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  uint32_t n = 0;
  st->npre = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < PY_MAX_FREEZE && st->npre < PY_MAX_FREEZE) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
    if (st->filter == PY_RUNNING_THREADS || st->offcpu) { /* a held thread reads 't' */
      st->pre_tids[st->npre] = tid;
      st->pre_states[st->npre++] = thread_state(st, tid);
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

/* ---- sampling ----------------------------------------------------------- */

static void sample_target(struct py_state *st, struct pp_target_entry *t) {
  static struct held held_buf[PY_MAX_FREEZE]; /* tick() never runs concurrently */
  struct py_target *pt = t->data;
  uint32_t held = 0;
  st->cur = t;
  if (st->blocking) held = freeze(st, held_buf);
  struct py_sample_result res;
  int rc =
      python_sample(st->walker, &pt->proc, st->cc, st->filter, pred_running, on_stack, st, &res);
  if (held) thaw(held_buf, held);
  st->npre = 0;
  pt->samples++;
  if (rc < 0 || res.failed) {
    pt->failed++;
    if (rc == -ESRCH) {
      python_target_exited(st, t);
    } else if (st->now_ns - pt->last_check_ns >= FAILED_CHECK_NS) {
      /* the usual cause of a sample that cannot be read is an exec: find
       * out now rather than fail every sample until the periodic check */
      python_check_identity(st, t);
    }
  }
}

/* In cpu mode only a thread on a CPU is sampled, and most processes of a
 * host are asleep at any moment. So before a sample reads a process's
 * interpreter and threads (about 13 us), a look asks the kernel: one pread
 * of each thread's schedstat says whether any ran since the last look, and
 * only if one did, its state file whether one runs now. And a process that
 * barely runs is looked at less and less often (every 2, 4, ... ticks, at
 * most once a second or every 16 ticks), the sample of its next look then standing for
 * every tick it was not looked at: the expected count of each stack stays
 * what a sample at every tick gives, so a host of mostly idle interpreters
 * costs little and their bursts are not under-counted. A process that ran
 * for 1 % of the time since its last look or more is looked at every tick.
 * A thread the process starts is started by one that ran, and an exec or
 * an exit moves or ends the watched threads, so such changes are seen at
 * the next look.
 * Cheaper still with many targets (python.switch_records_from, 100), when
 * the kernel gives per-CPU context switch records (CAP_PERFMON): they say
 * which processes are runnable at the tick (on a CPU, or preempted and
 * waiting for one), so every process is decided every tick without a
 * system call, and only those are sampled (weight 1); a tick whose records
 * overflowed falls back to looks. */
static bool can_skip(const struct py_state *st, const struct py_target *pt) {
  return st->filter == PY_RUNNING_THREADS && !st->blocking && pt->cpu && !pt->tids_unknown;
}

/* The span to the next look of a process that ran for `ran` ns of a look
 * spanning `window` ns (ran < 0: unknown). */
static uint32_t next_span(const struct py_state *st, const struct py_target *pt, int64_t ran,
                          uint64_t window) {
  if (ran < 0 || (uint64_t)ran * 100 >= window) return 1;
  uint32_t span = pt->asleep_span ? pt->asleep_span * 2 : 2;
  return span < st->max_asleep_span ? span : st->max_asleep_span;
}

static void sample_round(struct py_state *st, uint64_t missed) {
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct py_target *pt = t->data;
    pt->missed += missed;
    uint32_t weight = 1;
    if (can_skip(st, pt) && st->switches_ok) {
      /* the switch records say who is on a CPU: no look needed */
      pt->unlooked = 0;
      pt->asleep_span = 1;
      pt->was_running = pp_cpu_switches_runnable(st->switches, t->pid);
      if (!pt->was_running) {
        pt->skipped++;
        continue;
      }
    } else if (can_skip(st, pt)) {
      pt->unlooked++;
      if (pt->asleep_span > 1 && pt->unlooked < pt->asleep_span) {
        pt->skipped++; /* not looked at: the next look's sample stands for it */
        continue;
      }
      weight = pt->unlooked;
      pt->unlooked = 0;
      int64_t ran = pp_thread_cpu_ran_ns(pt->cpu);
      pt->asleep_span =
          pt->was_running ? 1 : next_span(st, pt, ran, (uint64_t)weight * st->interval_ns);
      /* the kernel adds a running thread's time only at its scheduler
       * ticks: one running at the last look is asked for its state */
      bool quiet = ran == 0 && !pt->was_running;
      if (!quiet && ran >= 0) quiet = pp_thread_cpu_any_running(pt->cpu) == 0;
      pt->was_running = !quiet;
      if (quiet) {
        /* no thread on a CPU now: what a sample would find. A process
         * that only ran a little is not checked for an exec either: a new
         * program starting runs more than that, or is announced again by
         * the host if it is another executable */
        pt->skipped++;
        continue;
      }
    } else {
      pt->unlooked = 0;
      pt->asleep_span = 1;
    }
    pt->ran_since_check = true;
    st->weight = weight;
    sample_target(st, t);
    st->weight = 1;
  }
}

/* Switch records cost in proportion to the host's context switches (every
 * one on every CPU is read), looks in proportion to the targets: records
 * pay off with many targets, so they are read only from switches_from
 * targets on (python.switch_records_from), and dropped again below half
 * that. */
static void use_switches(struct py_state *st) {
  if (st->filter != PY_RUNNING_THREADS || st->blocking || st->switches_refused ||
      !st->switches_from)
    return;
  size_t n = pp_target_table_count(st->targets, PP_TARGET_ATTACHED);
  if (!st->switches && n >= st->switches_from) {
    char why[256] = "";
    st->switches = pp_cpu_switches_open(0, why, sizeof(why));
    if (!st->switches) {
      st->switches_refused = true;
      PP_INFO(st->host,
              "context switch records unavailable (%s): each process's schedstat is read to "
              "learn whether it runs",
              why);
    }
  } else if (st->switches && n < st->switches_from / 2) {
    pp_cpu_switches_close(st->switches);
    st->switches = NULL;
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

int python_dump(struct py_state *st, struct pp_sink *sink) {
  st->dump_sink = sink;
  st->now_ns = pp_clock_ns(); /* thread names are read once for the whole dump */
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    st->cur = t;
    struct py_sample_result res;
    struct py_target *pt = t->data;
    /* every thread, whatever the sampling mode; not counted as a sample */
    python_sample(st->walker, &pt->proc, st->cc, PY_ALL_THREADS, pred_running, on_stack, st, &res);
  }
  st->dump_sink = NULL;
  return 0;
}

int python_tick(struct py_state *st, uint64_t now) {
  st->now_ns = now;
  uint64_t missed = 0, iv = st->interval_ns;
  if (!st->due_ns || now > st->due_ns + CATCHUP_MAX * iv) {
    if (st->due_ns) missed = (now - st->due_ns) / iv; /* samples given up */
    st->due_ns = now;
  }
  pp_target_table_poll(st->targets, now); /* interpreters still starting */
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    /* a process that slept since the last check has not exec'd: an exec
     * runs the new program, so the skip test above lets it be sampled and
     * then checked */
    struct py_target *pt = t->data;
    if (now >= pt->next_check_ns && pt->ran_since_check) {
      pt->ran_since_check = false;
      python_check_identity(st, t);
    }
  }
  if (st->native && !python_native_refused(st->native)) {
    /* the kernel's samples drive it: no schedule of our own */
    python_native_tick(st, now);
    if (!python_native_refused(st->native)) return 0;
  }
  use_switches(st);
  /* who is on a CPU now, for every target at once; a tick whose records
   * cannot be trusted (a ring overflowed) looks at each process instead */
  st->switches_ok = st->switches && pp_cpu_switches_read(st->switches) == 0;
  /* the host decides when a tick happens: always one sample */
  for (int round = 0; round < CATCHUP_PER_TICK; round++) {
    sample_round(st, round == 0 ? missed : 0);
    st->due_ns += iv;
    if (st->due_ns > now) break;
  }
  if (st->due_ns > now + iv) st->due_ns = now + iv; /* never run ahead of the host */
  return 0;
}
