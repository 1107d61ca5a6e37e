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
static uint64_t interval;
static pthread_mutex_t timers_lock = PTHREAD_MUTEX_INITIALIZER;

int ja_timers_init(size_t max_threads) {
  timers = calloc(max_threads, sizeof(*timers));
  if (!timers) return -ENOMEM;
  timers_cap = max_threads;
  return 0;
}

void ja_timers_set_interval(uint64_t ns) {
  pthread_mutex_lock(&timers_lock);
  interval = ns;
  struct itimerspec its = {.it_interval = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)},
                           .it_value = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}};
  for (size_t i = 0; i < timers_cap; i++)
    if (timers[i].tid) syscall(SYS_timer_settime, timers[i].id, 0, &its, NULL);
  pthread_mutex_unlock(&timers_lock);
}

static int add_locked(pid_t tid) {
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
  clockid_t clock = (clockid_t)((~(unsigned)tid) << 3) | 6;
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
  int rc = interval ? add_locked(tid) : 0;
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
      add_locked((pid_t)tid);
    }
    closedir(d);
    for (size_t i = 0; i < timers_cap; i++)
      if (timers[i].tid && !timers[i].seen) remove_slot(&timers[i]);
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
