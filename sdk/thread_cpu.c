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
  *s = (struct slot){
      .tid = tid, .stat_fd = fd, .sched_fd = -1, .runtime = UINT64_MAX, .used = c->gen};
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

int pp_thread_cpu_ran(struct pp_thread_cpu *c, uint32_t tid) {
  struct slot *s = slot_of(c, tid);
  char buf[512];
  if (!s || !read_fd(c, s, s->stat_fd, buf, sizeof(buf))) return -ESRCH;
  bool runnable = state_of(buf) == 'R';
  if (c->no_schedstat) return runnable;
  if (s->sched_fd < 0) {
    s->sched_fd = open_task_file(c->pid, tid, "schedstat");
    if (s->sched_fd < 0) {
      if (errno == ENOENT && access("/proc/self/schedstat", F_OK) != 0) c->no_schedstat = true;
      return runnable;
    }
  }
  if (!read_fd(c, s, s->sched_fd, buf, sizeof(buf))) return -ESRCH;
  /* "<ns on cpu> <ns waiting> <slices>" */
  uint64_t ran = strtoull(buf, NULL, 10);
  bool moved = s->runtime == UINT64_MAX || ran != s->runtime;
  s->runtime = ran;
  return runnable && moved;
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
