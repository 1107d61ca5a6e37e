/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One CPU-time timer per thread of the JVM.
 *
 * A per-thread CPU clock (clockid ((~tid) << 3) | 6, CPUCLOCK_SCHED of one
 * thread) with SIGEV_THREAD_ID delivers SIGPROF to exactly the thread that
 * burnt the CPU, so busy threads are sampled in proportion to their CPU time
 * and idle threads cost nothing. glibc refuses that clock id, hence the raw
 * syscalls. Each timer holds a preallocated sigqueue entry charged to the
 * user's RLIMIT_SIGPENDING, so dead threads' timers are deleted (ThreadEnd,
 * and a rescan of /proc/self/task at every dump for threads JVMTI does not
 * report, such as GC and compiler threads).
 *
 * Wall mode (--mode wall) arms the same per-thread timers on CLOCK_MONOTONIC
 * instead, so every thread gets its signal at the interval whether it runs
 * or waits. A thread that turns out not to be a Java thread (GC, compiler:
 * nothing to read but an error frame) deletes its own timer at its first
 * signal and is remembered, so the rescans do not arm it again; a thread
 * that attaches to the JVM later is armed by ThreadStart. The cost is one
 * signal per Java thread per interval, bounded by stretching the interval
 * so that the JVM gets at most JA_WALL_MAX_RATE signals a second, each
 * sample then counting for the intervals it stands for.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#ifndef SIGEV_THREAD_ID
#define SIGEV_THREAD_ID 4
#endif

struct ttimer {
  pid_t tid; /* 0: free */
  int id;    /* kernel timer id */
  int seen;  /* rescan mark */
};

static struct ttimer *timers;
static size_t timers_cap, timers_used;
static uint64_t interval, base_interval;
static int wall;
static pthread_mutex_t timers_lock = PTHREAD_MUTEX_INITIALIZER;

/* Wall mode: tids found not to be Java threads (open addressing, written
 * lock-free by the signal handler; 0 free). Full: such a thread keeps
 * getting its signal, which only costs a little. */
#define NONJAVA_SIZE 1024
static _Atomic pid_t nonjava[NONJAVA_SIZE];

static size_t nonjava_slot(pid_t tid) {
  return ((uint32_t)tid * 2654435761u) & (NONJAVA_SIZE - 1);
}

#define NONJAVA_TOMB ((pid_t)-1) /* a thread that attached to the JVM since */

static _Atomic pid_t *nonjava_find(pid_t tid) {
  for (size_t i = 0, k = nonjava_slot(tid); i < NONJAVA_SIZE;
       i++, k = (k + 1) & (NONJAVA_SIZE - 1)) {
    pid_t v = atomic_load(&nonjava[k]);
    if (v == tid) return &nonjava[k];
    if (v == 0) return NULL;
  }
  return NULL;
}

static int nonjava_has(pid_t tid) {
  return nonjava_find(tid) != NULL;
}

void ja_timer_not_java(pid_t tid) {
  ja_timer_delete_self(tid);
  for (size_t i = 0, k = nonjava_slot(tid); i < NONJAVA_SIZE;
       i++, k = (k + 1) & (NONJAVA_SIZE - 1)) {
    pid_t v = atomic_load(&nonjava[k]);
    if (v == tid) return;
    if (v == 0 && atomic_compare_exchange_strong(&nonjava[k], &v, tid)) return;
  }
}

static void nonjava_clear(void) {
  for (size_t i = 0; i < NONJAVA_SIZE; i++)
    atomic_store(&nonjava[i], 0);
}

int ja_timers_init(size_t max_threads) {
  timers = calloc(max_threads, sizeof(*timers));
  if (!timers) return -ENOMEM;
  timers_cap = max_threads;
  return 0;
}

static void set_interval_locked(uint64_t ns) {
  interval = ns;
  struct itimerspec its = {.it_interval = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)},
                           .it_value = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}};
  for (size_t i = 0; i < timers_cap; i++)
    if (timers[i].tid) syscall(SYS_timer_settime, timers[i].id, 0, &its, NULL);
}

void ja_timers_set_interval(uint64_t ns, int wall_clock) {
  pthread_mutex_lock(&timers_lock);
  if (wall_clock != wall) nonjava_clear(); /* a new mode learns the threads again */
  wall = wall_clock;
  base_interval = ns;
  ja_sampler_set_weight(1);
  set_interval_locked(ns);
  pthread_mutex_unlock(&timers_lock);
}

/* Wall mode: at most JA_WALL_MAX_RATE signals a second over all threads;
 * more threads stretch the interval by a whole factor, and each sample
 * counts for that many intervals. */
static void bound_wall_rate_locked(void) {
  if (!wall || !base_interval) return;
  uint64_t rate = (uint64_t)timers_used * (1000000000ull / base_interval);
  uint64_t stretch = rate > JA_WALL_MAX_RATE ? (rate + JA_WALL_MAX_RATE - 1) / JA_WALL_MAX_RATE : 1;
  if (base_interval * stretch == interval) return;
  ja_sampler_set_weight((uint32_t)stretch);
  set_interval_locked(base_interval * stretch);
}

static int add_locked(pid_t tid, int java_thread) {
  _Atomic pid_t *nj = wall ? nonjava_find(tid) : NULL;
  if (nj && !java_thread) return 0;
  if (nj) {
    /* a thread that attached to the JVM after its timer deleted itself:
     * its slot's timer is gone, a new one is made below */
    atomic_store(nj, NONJAVA_TOMB);
    for (size_t i = 0; i < timers_cap; i++)
      if (timers[i].tid == tid) {
        timers[i].tid = 0;
        timers_used--;
      }
  }
  size_t free_slot = timers_cap;
  for (size_t i = 0; i < timers_cap; i++) {
    if (timers[i].tid == tid) {
      timers[i].seen = 1;
      return 0;
    }
    if (!timers[i].tid && free_slot == timers_cap) free_slot = i;
  }
  if (free_slot == timers_cap) return -ENOSPC;
  struct sigevent sev;
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = tid;
  clockid_t clock = wall ? CLOCK_MONOTONIC : (clockid_t)((~(unsigned)tid) << 3) | 6;
  int id = 0;
  if (syscall(SYS_timer_create, clock, &sev, &id) != 0) return -errno;
  struct itimerspec its = {
      .it_interval = {(time_t)(interval / 1000000000u), (long)(interval % 1000000000u)},
      .it_value = {(time_t)(interval / 1000000000u), (long)(interval % 1000000000u)}};
  if (syscall(SYS_timer_settime, id, 0, &its, NULL) != 0) {
    int e = errno;
    syscall(SYS_timer_delete, id);
    return -e;
  }
  timers[free_slot] = (struct ttimer){.tid = tid, .id = id, .seen = 1};
  timers_used++;
  return 0;
}

int ja_timer_add(pid_t tid) {
  pthread_mutex_lock(&timers_lock);
  int rc = interval ? add_locked(tid, 1) : 0;
  pthread_mutex_unlock(&timers_lock);
  return rc;
}

static void remove_slot(struct ttimer *t) {
  syscall(SYS_timer_delete, t->id);
  t->tid = 0;
  timers_used--;
}

void ja_timer_remove(pid_t tid) {
  pthread_mutex_lock(&timers_lock);
  for (size_t i = 0; i < timers_cap; i++)
    if (timers[i].tid == tid) remove_slot(&timers[i]);
  pthread_mutex_unlock(&timers_lock);
}

void ja_timers_rescan(void) {
  pthread_mutex_lock(&timers_lock);
  if (!interval) {
    pthread_mutex_unlock(&timers_lock);
    return;
  }
  for (size_t i = 0; i < timers_cap; i++)
    timers[i].seen = 0;
  DIR *d = opendir("/proc/self/task");
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      char *end;
      long tid = strtol(de->d_name, &end, 10);
      if (*end || tid <= 0) continue;
      add_locked((pid_t)tid, 0);
    }
    closedir(d);
    for (size_t i = 0; i < timers_cap; i++) {
      if (!timers[i].tid) continue;
      if (wall && nonjava_has(timers[i].tid)) {
        /* its timer deleted itself; its id may be another timer's by now */
        timers[i].tid = 0;
        timers_used--;
      } else if (!timers[i].seen) {
        remove_slot(&timers[i]);
      }
    }
    bound_wall_rate_locked();
  }
  pthread_mutex_unlock(&timers_lock);
}

void ja_timers_stop_all(void) {
  pthread_mutex_lock(&timers_lock);
  interval = 0;
  for (size_t i = 0; i < timers_cap; i++)
    if (timers[i].tid) remove_slot(&timers[i]);
  pthread_mutex_unlock(&timers_lock);
}

void ja_timer_delete_self(pid_t tid) {
  /* lock-free read of the table: a stale id only makes timer_delete fail;
   * the slot is reclaimed by the next stop_all/rescan */
  for (size_t i = 0; i < timers_cap; i++)
    if (timers[i].tid == tid) syscall(SYS_timer_delete, timers[i].id);
}

size_t ja_timers_count(void) {
  return timers_used;
}
