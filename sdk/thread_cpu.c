/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-thread on-CPU state through kept-open /proc files (thread_cpu.h).
 */
#include "polyprof/kit/thread_cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct slot {
  uint32_t tid;
  int stat_fd, sched_fd; /* -1: not open */
  uint64_t runtime;      /* schedstat ns at the previous look, UINT64_MAX: none yet */
  uint64_t idle_runtime; /* the same for pp_thread_cpu_ran_ns */
  uint64_t idle_slices;  /* and its count of times switched in */
  uint32_t used;         /* generation of its last look */
};

struct pp_thread_cpu {
  uint32_t pid, max, n;
  uint32_t gen, swept_gen;
  bool no_schedstat; /* the kernel has none: state letters only */
  struct slot *s;
};

struct pp_thread_cpu *pp_thread_cpu_new(uint32_t pid, uint32_t max_threads) {
  struct pp_thread_cpu *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->pid = pid;
  c->max = max_threads ? max_threads : 64;
  c->s = calloc(c->max, sizeof(*c->s));
  if (!c->s) {
    free(c);
    return NULL;
  }
  return c;
}

static void close_slot(struct pp_thread_cpu *c, uint32_t i) {
  if (c->s[i].stat_fd >= 0) close(c->s[i].stat_fd);
  if (c->s[i].sched_fd >= 0) close(c->s[i].sched_fd);
  c->s[i] = c->s[--c->n];
}

void pp_thread_cpu_free(struct pp_thread_cpu *c) {
  if (!c) return;
  while (c->n)
    close_slot(c, 0);
  free(c->s);
  free(c);
}

static int open_task_file(uint32_t pid, uint32_t tid, const char *what) {
  char path[80];
  snprintf(path, sizeof(path), "/proc/%u/task/%u/%s", pid, tid, what);
  return open(path, O_RDONLY | O_CLOEXEC);
}

/* The slot of tid, opened on first use; NULL if the thread is gone. */
static struct slot *slot_of(struct pp_thread_cpu *c, uint32_t tid) {
  c->gen++;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->s[i].tid == tid) {
      c->s[i].used = c->gen;
      return &c->s[i];
    }
  int fd = open_task_file(c->pid, tid, "stat");
  if (fd < 0) return NULL;
  if (c->n == c->max) { /* evict the least recently used */
    uint32_t old = 0;
    for (uint32_t i = 1; i < c->n; i++)
      if (c->s[i].used < c->s[old].used) old = i;
    close_slot(c, old);
  }
  struct slot *s = &c->s[c->n++];
  *s = (struct slot){.tid = tid,
                     .stat_fd = fd,
                     .sched_fd = -1,
                     .runtime = UINT64_MAX,
                     .idle_runtime = UINT64_MAX,
                     .used = c->gen};
  return s;
}

/* pread of a kept file; on failure the thread is gone: its slot closes. */
static bool read_fd(struct pp_thread_cpu *c, struct slot *s, int fd, char *buf, size_t cap) {
  ssize_t n = pread(fd, buf, cap - 1, 0);
  if (n > 0) {
    buf[n] = '\0';
    return true;
  }
  close_slot(c, (uint32_t)(s - c->s));
  return false;
}

/* state letter out of a stat line: the comm may hold ')' and spaces */
static char state_of(const char *stat) {
  const char *p = strrchr(stat, ')');
  return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

char pp_thread_cpu_state(struct pp_thread_cpu *c, uint32_t tid) {
  struct slot *s = slot_of(c, tid);
  char buf[512];
  if (!s || !read_fd(c, s, s->stat_fd, buf, sizeof(buf))) return 0;
  return state_of(buf);
}

/* The thread's schedstat run time (and, optional, how many times it was
 * switched in) through its kept file; false if gone. */
static bool sched_runtime(struct pp_thread_cpu *c, struct slot *s, uint64_t *ran,
                          uint64_t *slices) {
  if (s->sched_fd < 0) {
    s->sched_fd = open_task_file(c->pid, s->tid, "schedstat");
    if (s->sched_fd < 0) {
      if (errno == ENOENT && access("/proc/self/schedstat", F_OK) != 0) c->no_schedstat = true;
      return false;
    }
  }
  char buf[128];
  if (!read_fd(c, s, s->sched_fd, buf, sizeof(buf))) return false;
  /* "<ns on cpu> <ns waiting> <times switched in>" */
  char *end;
  *ran = strtoull(buf, &end, 10);
  if (slices) {
    strtoull(end, &end, 10);
    *slices = strtoull(end, NULL, 10);
  }
  return true;
}

int pp_thread_cpu_ran(struct pp_thread_cpu *c, uint32_t tid) {
  struct slot *s = slot_of(c, tid);
  if (!s) return -ESRCH;
  if (!c->no_schedstat) {
    uint32_t before = c->n;
    uint64_t ran;
    if (sched_runtime(c, s, &ran, NULL)) {
      /* "<ns on cpu> <ns waiting> <slices>": a thread that did not run
       * since the last look is still where the last sample saw it, and
       * counting it again would weigh its wait in a run queue as CPU time;
       * its state need not even be read */
      bool moved = s->runtime == UINT64_MAX || ran != s->runtime;
      s->runtime = ran;
      if (!moved) return 0;
    } else if (c->n != before) {
      return -ESRCH; /* gone: its slot closed */
    }
  }
  char buf[512];
  if (!read_fd(c, s, s->stat_fd, buf, sizeof(buf))) return -ESRCH;
  return state_of(buf) == 'R';
}

int64_t pp_thread_cpu_ran_ns(struct pp_thread_cpu *c) {
  if (!c->n || c->n == c->max || c->no_schedstat) return -1;
  c->gen++;
  bool known = true;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < c->n;) {
    struct slot *s = &c->s[i];
    uint32_t before = c->n;
    uint64_t ran, slices;
    if (!sched_runtime(c, s, &ran, &slices)) {
      known = false;
      if (c->n == before) i++; /* open failed, the slot stays */
      continue;                /* else gone: its slot now holds another thread */
    }
    if (s->idle_runtime == UINT64_MAX || ran < s->idle_runtime)
      known = false;
    else if (ran != s->idle_runtime)
      sum += ran - s->idle_runtime;
    else if (slices != s->idle_slices)
      sum += 1; /* switched in since: its run time is counted at the next scheduler tick */
    s->idle_runtime = ran;
    s->idle_slices = slices;
    s->used = c->gen;
    i++;
  }
  return known && sum <= INT64_MAX ? (int64_t)sum : -1;
}

int pp_thread_cpu_any_running(struct pp_thread_cpu *c) {
  if (!c->n) return -1;
  char buf[512];
  for (uint32_t i = 0; i < c->n;) {
    struct slot *s = &c->s[i];
    uint32_t before = c->n;
    if (!read_fd(c, s, s->stat_fd, buf, sizeof(buf))) {
      if (c->n == before) i++;
      continue;
    }
    if (state_of(buf) == 'R') return 1;
    i++;
  }
  return 0;
}

void pp_thread_cpu_sweep(struct pp_thread_cpu *c) {
  for (uint32_t i = 0; i < c->n;) {
    if (c->s[i].used <= c->swept_gen)
      close_slot(c, i);
    else
      i++;
  }
  c->swept_gen = c->gen;
}

size_t pp_thread_cpu_fds(const struct pp_thread_cpu *c) {
  size_t n = 0;
  for (uint32_t i = 0; i < c->n; i++)
    n += (c->s[i].stat_fd >= 0) + (c->s[i].sched_fd >= 0);
  return n;
}
