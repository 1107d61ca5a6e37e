/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampling thread of the ruby plugin.
 *
 * Where the kernel allows it (root or CAP_PERFMON, perf_event_paranoid), a
 * running Ruby thread is sampled when it has used 1/frequency of CPU time:
 * each Ruby thread has a CPU alarm (ruby_cpuclock.c) and this thread sleeps
 * in epoll_wait until one fires, then samples every thread whose alarm
 * fired, all in one wake-up, weighting each stack by the periods it used.
 * That is stackprof's ITIMER_PROF rule from outside: a sleeping or starved
 * process costs nothing, 10 idle targets cost no wake-ups, and the samples
 * add up to CPU time the way perf's do.
 *
 * Targets without alarms (perf events refused, a version whose table lacks
 * the thread ids so only the GVL holder can be read, `oncpu: false`) are
 * sampled on wall-clock ticks at the frequency, as gProfiler's rbspy does;
 * ticks run only while such a target exists. Housekeeping (attach retries,
 * thread lists, the target table's liveness checks) runs from the same
 * loop, a few times a second while something is due.
 *
 * Everything runs under st->lock, released only while waiting, so the
 * host's add_targets() and snapshot() see consistent tables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"
#include "ruby.h"

/* Thread lists are re-read every 50 ms while threads come and go (a new
 * thread is sampled only once listed), backing off to 1 s when stable. */
#define THREADS_REFRESH_MIN_NS 50000000ull
#define THREADS_REFRESH_MAX_NS 1000000000ull
/* An alarm-driven target is refreshed when one of its alarms wakes us
 * anyway (no wake-up of its own); only one whose threads all sleep needs
 * a timed refresh, and that one can wait this many intervals: a sleeping
 * process that starts a busy thread has it sampled within ~4 s. */
#define IDLE_REFRESH_FACTOR 4
#define WAKE_KEY UINT64_MAX /* epoll key of wakefd; alarms are pid << 32 | tid */
#define EVENTS_PER_WAKE 64

/* The process exited: its entry is released now, which frees t. */
static void mark_gone(struct ruby_state *st, struct ruby_target *t) {
  st->c_gone++;
  pp_target_table_gone(st->tt, t->entry);
}

/* False if the target is gone (t is freed then). */
static bool still_there(struct ruby_state *st, struct ruby_target *t) {
  uint64_t start = 0;
  char state = '?';
  /* a zombie keeps its pid and start time until reaped, but has no memory
   * left to read: it is gone for us. One read of /proc/PID/stat answers
   * both (every target that exits passes here) */
  if (pp_proc_start_state(t->pid, &start, &state) < 0 || start != t->start_time || state == 'Z' ||
      state == 'X') {
    mark_gone(st, t);
    return false;
  }
  return true;
}

/* Gives every Ruby thread of an attached target a CPU alarm, or none of
 * them: a target is either alarm-driven or tick-driven, never both (its
 * samples would be counted twice). */
void ruby_sync_alarms(struct ruby_state *st, struct ruby_target *t) {
  bool want = st->use_cpuclock && t->per_thread && !t->cpuclock_failed && t->nthreads > 0;
  int rc = 0;
  for (uint32_t i = 0; want && i < t->nthreads && rc == 0; i++) {
    struct ruby_thread *th = &t->threads[i];
    if (th->pfd >= 0 || !th->tid) continue;
    uint64_t key = ((uint64_t)t->pid << 32) | th->tid;
    rc = ruby_cpuclock_open(th, th->tid, st->period_ns, st->epfd, key);
    if (rc == -ESRCH) rc = 0; /* the thread just ended: the next list drops it */
  }
  if (want && rc == 0) {
    t->cpuclock = true;
    return;
  }
  if (want) {
    t->cpuclock_failed = true;
    PP_WARNING(st->host, "pid %u: no CPU alarms (%s): sampling on wall-clock ticks", t->pid,
               strerror(-rc));
  }
  for (uint32_t i = 0; i < t->nthreads; i++)
    ruby_cpuclock_close(&t->threads[i]);
  t->cpuclock = false;
}

/* Threads came or went: re-read the list soon (not at once: a thread
 * whose alarm keeps firing must not turn into a refresh per alarm). */
static void list_stale(struct ruby_state *st, struct ruby_target *t) {
  t->threads_every = THREADS_REFRESH_MIN_NS;
  t->threads_changed = true; /* a full read, not the quick first/last check */
  uint64_t due = t->threads_at_ns + THREADS_REFRESH_MIN_NS;
  if (due < st->next_house_ns) st->next_house_ns = due;
}

/* After a thread list that could not be read from a live process: a VM
 * pointer that moved or vanished means a new program image (an exec of
 * the same executable, which the table's liveness check cannot tell):
 * attach again. False if t was released. */
static bool same_image(struct ruby_state *st, struct ruby_target *t) {
  uint64_t vm = 0;
  int rc = pp_remote_read((pid_t)t->pid, t->vm_ptr_addr, &vm, sizeof(vm));
  if (rc == -ESRCH) {
    mark_gone(st, t);
    return false;
  }
  if (rc == 0 && vm == t->vm) return true;
  pp_target_table_reattach(st->tt, t->entry);
  return false;
}

/* False if the target was released (t is freed then). */
static bool refresh_threads(struct ruby_state *st, struct ruby_target *t) {
  /* a list that cannot be read may be a process that exited (alarm-driven
   * targets are not checked in /proc otherwise) */
  if (ruby_threads_refresh(st, t) < 0 && (!still_there(st, t) || !same_image(st, t))) return false;
  ruby_sync_alarms(st, t);
  if (t->threads_changed || t->threads_every < THREADS_REFRESH_MIN_NS)
    t->threads_every = THREADS_REFRESH_MIN_NS;
  else if (t->threads_every < THREADS_REFRESH_MAX_NS)
    t->threads_every *= 2;
  return true;
}

/* Counts the stack a walk left in st->ids `weight` times (n: the walk's
 * result). 0, -EAGAIN if the read was torn, -ESRCH if the process is gone
 * (the caller looks). */
/* The n frames a walk left in st->ids, as the plugin ABI's frames in st->out. */
static void frames_out(struct ruby_state *st, int n) {
  for (int i = 0; i < n; i++) {
    const struct ruby_frame *f = &st->frames.v[st->ids[i]];
    st->out[i] = (struct pp_frame){
        .name = ruby_strings_get(&st->strings, f->name),
        .file = f->file == RUBY_NO_ID ? NULL : ruby_strings_get(&st->strings, f->file),
        .line = f->line,
        .kind = f->kind};
  }
}

static int count_stack(struct ruby_state *st, struct ruby_target *t, int n, bool truncated,
                       uint64_t weight, bool blocked) {
  if (n == -ESRCH) return n;
  if (n == -ENOSPC) {
    st->c_full++;
    return 0;
  }
  if (n < 0) {
    st->c_torn++;
    t->torn++;
    return -EAGAIN;
  }
  if (truncated) st->c_truncated++;
  if (n == 0) return 0;
  frames_out(st, n);
  /* --mode offcpu: a blocked thread's tick is the sampling period off its
   * CPU, in microseconds; in cpu mode it makes no cpu sample, in wall mode
   * it still makes its wall sample */
  if (blocked && pp_stack_table_add_typed(st->stacks, PP_PROFILE_OFFCPU, t->pid, 0, NULL, st->out,
                                          (uint32_t)n, weight * (st->period_ns / 1000)) < 0)
    return 0;
  /* a full table counts the drop itself ("dropped_stacks") */
  if ((!blocked || !st->oncpu) &&
      pp_stack_table_add(st->stacks, t->pid, 0, NULL, st->out, (uint32_t)n, weight) < 0)
    return 0;
  st->c_samples++;
  t->samples++;
  return 0;
}

/* Walks one EC (the GVL holder's) and counts its stack once. */
static int record(struct ruby_state *st, struct ruby_target *t, uint64_t ec) {
  bool truncated = false;
  int n = ruby_walk(st, t, ec, &truncated);
  return count_stack(st, t, n, truncated, 1, false);
}

/* Samples one Ruby thread. -ESRCH if the process is gone, -EAGAIN if the
 * thread list looks stale, else 0. */
static int sample_thread(struct ruby_state *st, struct ruby_target *t, struct ruby_thread *th,
                         uint64_t weight, bool blocked) {
  bool truncated = false;
  int n = ruby_walk_thread(st, t, th, &truncated);
  if (n == -ESRCH) return n;
  /* no EC: the Ruby thread finished (its native thread may live on in
   * Ruby's thread cache) or has not started. Nothing torn, nothing to
   * read; the list is stale */
  if (n == -ENOENT) return -EAGAIN;
  return count_stack(st, t, n, truncated, weight, blocked);
}

/* dump(): every Ruby thread of every attached target read once and
 * emitted at once with its tid, outside the session's counts. A target
 * whose threads cannot be listed (per_thread off) has no tids to give and
 * is left out. Called with st->lock held. */
int ruby_dump_locked(struct ruby_state *st, struct pp_sink *sink) {
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_ATTACHED) {
    struct ruby_target *t = e->data;
    if (!t->per_thread) continue;
    for (uint32_t k = 0; k < t->nthreads; k++) {
      struct ruby_thread *th = &t->threads[k];
      bool truncated = false;
      int n = th->tid ? ruby_walk_thread(st, t, th, &truncated) : -ENOENT;
      if (n <= 0) continue;
      frames_out(st, n);
      struct pp_sample smp = {
          .pid = t->pid, .tid = th->tid, .frames = st->out, .nframes = (uint32_t)n, .count = 1};
      st->host->emit(sink, &smp);
    }
  }
  return 0;
}

/* ---- CPU alarms ---- */

static void on_alarm(struct ruby_state *st, uint64_t key, uint32_t events) {
  uint32_t pid = (uint32_t)(key >> 32), tid = (uint32_t)key;
  struct pp_target_entry *e = pp_target_table_find(st->tt, pid);
  if (!e || e->state != PP_TARGET_ATTACHED) return;
  struct ruby_target *t = e->data;
  if (t->cpuclock) {
    for (uint32_t j = 0; j < t->nthreads; j++) {
      struct ruby_thread *th = &t->threads[j];
      if (th->tid != tid || th->pfd < 0) continue;
      uint64_t n = ruby_cpuclock_drain(th);
      st->c_alarms += n;
      st->alarms_total += n;
      if (events & (EPOLLHUP | EPOLLERR)) {
        /* the thread ended (its event hangs up): its rb_thread_t may be
         * freed already, so no sample. The main thread ending is the
         * process exiting (Ruby's main thread calls exit(); a leader that
         * left alone makes the process a zombie, which still_there() calls
         * gone too): the target is done, without a list read that would
         * fail and a /proc look. Another thread: drop its alarm now, the
         * thread list catches up at the next housekeeping */
        if (th->tid == t->pid) {
          mark_gone(st, t);
          return;
        }
        ruby_cpuclock_close(th);
        list_stale(st, t);
        return;
      }
      if (!n) return;
      int rc = sample_thread(st, t, th, n, false);
      if (rc == -ESRCH) {
        still_there(st, t);
        return;
      }
      if (rc == -EAGAIN) list_stale(st, t);
      /* awake anyway: the thread list too, if due (th may move) */
      if (st->now_ns - t->threads_at_ns >= t->threads_every) refresh_threads(st, t);
      return;
    }
  }
}

/* ---- wall-clock ticks (targets without alarms) ---- */

/* CPU time of the whole process (all threads) in ns, from its CPU clock:
 * one cheap system call, no /proc text to format. 0 if unavailable. */
static uint64_t process_cpu_ns(uint32_t pid) {
  /* MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's ABI */
  clockid_t cid = (clockid_t)((~(unsigned)pid << 3) | 2u);
  struct timespec ts;
  if (clock_gettime(cid, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void tick_target(struct ruby_state *st, struct ruby_target *t) {
  if (st->oncpu && !st->offcpu) {
    /* no thread of the process ran since the last tick: nothing moved,
     * skip the per-thread checks */
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
    for (uint32_t i = 0; i < t->nthreads; i++) {
      struct ruby_thread *th = &t->threads[i];
      bool blocked = false;
      if (st->offcpu && th->tid) {
        char state = pp_thread_cpu_state(t->cpu, th->tid);
        blocked = state != 0 && state != 'R';
      }
      if (st->oncpu && !blocked && (!th->tid || pp_thread_cpu_ran(t->cpu, th->tid) != 1)) continue;
      any = true;
      int rc = sample_thread(st, t, th, 1, blocked);
      if (rc == -ESRCH) {
        still_there(st, t);
        return;
      }
      if (rc == -EAGAIN) list_stale(st, t); /* the thread may be gone */
    }
    if (!any) {
      st->c_idle++;
      t->idle++;
    }
    return;
  }
  /* rbspy's way: the thread holding (or last holding) the GVL */
  if (st->oncpu && !ruby_any_task_running(t)) {
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
  if (record(st, t, ec) == -ESRCH) still_there(st, t);
}

/* ---- the loop ---- */

/* The earliest a housekeeping pass is worth it, so a retry due now does
 * not spin the loop. */
#define HOUSE_MIN_NS 1000000ull

/* Attach retries, liveness, thread lists. Returns when it is due next;
 * *ticks tells whether some target needs wall-clock ticks. */
static uint64_t housekeeping(struct ruby_state *st, bool *ticks) {
  uint64_t next = st->now_ns + THREADS_REFRESH_MAX_NS * IDLE_REFRESH_FACTOR;
  *ticks = false;
  pp_target_table_poll(st->tt, st->now_ns);
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_PENDING) {
    if (e->next_try_ns < next) next = e->next_try_ns;
  }
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_ATTACHED) {
    struct ruby_target *t = e->data;
    /* a quarter early is fine: stable targets then fall into step and
     * share one wake-up a second instead of one each */
    uint64_t every = t->threads_every;
    if (t->cpuclock && every >= THREADS_REFRESH_MAX_NS) every *= IDLE_REFRESH_FACTOR;
    if (st->now_ns - t->threads_at_ns + every / 4 >= every) {
      /* alarm-driven targets learn of their exit from the alarms' hang-up
       * and from failed reads: no /proc look every refresh */
      if (!t->cpuclock && !still_there(st, t)) continue;
      if (!refresh_threads(st, t)) continue;
      every = t->threads_every;
      if (t->cpuclock && every >= THREADS_REFRESH_MAX_NS) every *= IDLE_REFRESH_FACTOR;
    }
    if (t->threads_at_ns + every < next) next = t->threads_at_ns + every;
    if (!t->cpuclock) *ticks = true;
  }
  if (next < st->now_ns + HOUSE_MIN_NS) next = st->now_ns + HOUSE_MIN_NS;
  return next;
}

static void run_ticks(struct ruby_state *st) {
  st->c_ticks++;
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->tt, e, PP_TARGET_ATTACHED) {
    struct ruby_target *t = e->data;
    if (!t->cpuclock) tick_target(st, t);
  }
}

/* Whether to pause after a wake-up that sampled (below). A pause costs a
 * wake-up of its own and saves one per alarm it gathers beyond the first,
 * so it pays only when more than one alarm is expected within batch_ns:
 * the alarm rate over the last RATE_WINDOW_NS says. Targets that get
 * little CPU (a loaded host, a mostly idle server) keep a wake-up per
 * alarm, at once. */
#define RATE_WINDOW_NS 200000000ull
#define BATCH_MIN_EXPECTED 1.5

static bool batch_pays(struct ruby_state *st) {
  uint64_t dt = st->now_ns - st->rate_since_ns;
  if (dt >= RATE_WINDOW_NS) {
    st->alarm_rate = (double)(st->alarms_total - st->rate_alarms0) * 1e9 / (double)dt;
    st->rate_since_ns = st->now_ns;
    st->rate_alarms0 = st->alarms_total;
  }
  return st->alarm_rate * (double)st->batch_ns / 1e9 >= BATCH_MIN_EXPECTED;
}

/* After a wake-up that sampled: let the alarms that fire in the next
 * batch_ns queue up in their rings (their weight is kept there) and serve
 * them all with one wake-up, instead of one each. A wake-up -- a context
 * switch -- costs more than the stack read it serves on this kind of host,
 * so with two busy CPUs at 100 Hz and 10 ms this halves the wake-ups, and
 * on a host with many busy Ruby threads it divides them by their number;
 * the price is a stack read up to batch_ns (at most one period) after its
 * alarm. A plain sleep, not a poll of wakefd: new targets and stop wait at
 * most batch_ns, and the sleep is the cheaper system call. */
static void batch_pause(struct ruby_state *st) {
  if (!st->batch_ns || st->stopping || !batch_pays(st)) return;
  st->c_pauses++;
  uint64_t until = st->now_ns + st->batch_ns;
  struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                        .tv_nsec = (long)(until % 1000000000ull)};
  pthread_mutex_unlock(&st->lock);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
  pthread_mutex_lock(&st->lock);
}

static void *sampler_main(void *arg) {
  struct ruby_state *st = arg;
  struct epoll_event evs[EVENTS_PER_WAKE];
  pthread_mutex_lock(&st->lock);
  st->next_house_ns = 0;
  bool ticks = false;
  while (!st->stopping) {
    st->now_ns = pp_clock_ns();
    if (st->now_ns >= st->next_house_ns) {
      bool had = ticks;
      st->next_house_ns = housekeeping(st, &ticks);
      if (ticks && !had) st->next_tick_ns = st->now_ns + st->period_ns;
    }
    if (ticks && st->now_ns >= st->next_tick_ns) {
      run_ticks(st);
      /* fixed rate, but no burst of catch-up ticks after a slow one */
      st->next_tick_ns += st->period_ns;
      if (st->next_tick_ns <= st->now_ns) st->next_tick_ns = st->now_ns + st->period_ns;
    }
    uint64_t until = st->next_house_ns;
    if (ticks && st->next_tick_ns < until) until = st->next_tick_ns;
    uint64_t wait = until > st->now_ns ? until - st->now_ns : 0;
    int timeout_ms = (int)((wait + 999999) / 1000000);
    pthread_mutex_unlock(&st->lock);
    int n = epoll_wait(st->epfd, evs, EVENTS_PER_WAKE, timeout_ms);
    pthread_mutex_lock(&st->lock);
    if (n <= 0) continue;
    st->c_wakeups++;
    st->now_ns = pp_clock_ns();
    uint64_t served = st->c_alarms;
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u64 == WAKE_KEY) {
        uint64_t v;
        if (read(st->wakefd, &v, sizeof(v)) < 0) { /* nothing to do: level reset */
        }
        st->next_house_ns = 0; /* new targets: attach them now */
        continue;
      }
      on_alarm(st, evs[i].data.u64, evs[i].events);
    }
    if (st->c_alarms != served) batch_pause(st);
  }
  pthread_mutex_unlock(&st->lock);
  return NULL;
}

int ruby_sampler_start(struct ruby_state *st) {
  st->epfd = epoll_create1(EPOLL_CLOEXEC);
  st->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (st->epfd < 0 || st->wakefd < 0) goto fail;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_KEY};
  if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->wakefd, &ev) < 0) goto fail;
  st->stopping = false;
  if (pthread_create(&st->thread, NULL, sampler_main, st) != 0) goto fail;
  st->thread_started = true;
  return 0;
fail:;
  int e = errno ? -errno : -ENOMEM;
  if (st->epfd >= 0) close(st->epfd);
  if (st->wakefd >= 0) close(st->wakefd);
  st->epfd = st->wakefd = -1;
  return e;
}

void ruby_sampler_wake(struct ruby_state *st) {
  uint64_t one = 1;
  if (st->wakefd >= 0 && write(st->wakefd, &one, sizeof(one)) < 0) {
    /* a full counter already means "wake up" */
  }
}

void ruby_sampler_stop(struct ruby_state *st) {
  if (st->thread_started) {
    pthread_mutex_lock(&st->lock);
    st->stopping = true;
    pthread_mutex_unlock(&st->lock);
    ruby_sampler_wake(st);
    pthread_join(st->thread, NULL);
    st->thread_started = false;
  }
  /* the alarms are closed when the caller frees the target table; the
   * loop's own fds go last */
}
