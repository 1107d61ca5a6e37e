/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-CPU context-switch records (cpu_switches.h).
 *
 * A PERF_RECORD_SWITCH_CPU_WIDE record names the task switching (its
 * sample_id, PERF_SAMPLE_TID) and the other one (next_prev_pid): a switch
 * out names the next task, a switch in the previous one. So the last record
 * of a CPU says who runs on it, whichever direction it is; and a thread
 * switched out preempted (PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) waits in a
 * run queue, runnable, until its next switch in. The ring is
 * written by the kernel and read here: every length is checked against
 * what is in the ring before use.
 */
#include "polyprof/kit/cpu_switches.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef PERF_RECORD_MISC_SWITCH_OUT_PREEMPT
#define PERF_RECORD_MISC_SWITCH_OUT_PREEMPT (1 << 14)
#endif

#define TID_SLOTS 2048 /* power of two */
#define TID_MAX 1536   /* threads tracked between two reads; more: not exact */

struct cpu_stream {
  int fd;
  void *ring;
  uint32_t cur; /* thread group on the CPU as of its last record */
  bool known;   /* a record has been seen */
};

/* A thread's last switch, by time: the rings of different CPUs are read
 * one after the other, so a thread migrated between two CPUs may show its
 * newer switch before its older one. */
struct tid_state {
  uint32_t tid, tgid;
  uint64_t time;
  bool waiting; /* switched out preempted: runnable, in a run queue */
};

struct pp_cpu_switches {
  struct cpu_stream *cpu;
  size_t ncpu;
  size_t ring_bytes, map_bytes;
  struct tid_state *tids, *spare; /* TID_SLOTS each, tid 0 = empty */
  size_t ntids;
  bool tids_full;
  uint64_t prev_read_ns;
  uint64_t trust_after_ns; /* who waits is known only once those waiting ran */
  uint32_t *runnable;      /* sorted thread group ids on a CPU or waiting for one */
  size_t nrunnable;
  uint64_t lost;
};

#define GRACE_NS 200000000ull /* longer than a thread waits in a run queue, mostly */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_stream(int cpu) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_DUMMY;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.sample_id_all = 1;
  a.context_switch = 1;
  a.watermark = 1; /* nobody polls these: wake no one before the ring is nearly full */
  a.wakeup_watermark = 1u << 30;
  long fd = syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : (int)fd;
}

void pp_cpu_switches_close(struct pp_cpu_switches *s) {
  if (!s) return;
  for (size_t i = 0; i < s->ncpu; i++) {
    if (s->cpu[i].ring) munmap(s->cpu[i].ring, s->map_bytes);
    if (s->cpu[i].fd >= 0) close(s->cpu[i].fd);
  }
  free(s->cpu);
  free(s->tids);
  free(s->spare);
  free(s->runnable);
  free(s);
}

struct pp_cpu_switches *pp_cpu_switches_open(uint32_t ring_pages, char *why, size_t why_len) {
  if (ring_pages == 0) ring_pages = 32;
  if (ring_pages & (ring_pages - 1)) {
    snprintf(why, why_len, "ring of %u pages: not a power of two", ring_pages);
    return NULL;
  }
  long n = sysconf(_SC_NPROCESSORS_CONF);
  long ps = sysconf(_SC_PAGESIZE);
  if (n < 1 || n > 65536 || ps <= 0) {
    snprintf(why, why_len, "cannot count the CPUs");
    return NULL;
  }
  struct pp_cpu_switches *s = calloc(1, sizeof(*s));
  if (!s || !(s->cpu = calloc((size_t)n, sizeof(*s->cpu))) ||
      !(s->tids = calloc(TID_SLOTS, sizeof(*s->tids))) ||
      !(s->spare = calloc(TID_SLOTS, sizeof(*s->spare))) ||
      !(s->runnable = calloc((size_t)n + TID_MAX, sizeof(*s->runnable)))) {
    if (s) {
      free(s->cpu);
      free(s->tids);
      free(s->spare);
    }
    free(s);
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  s->ncpu = (size_t)n;
  s->ring_bytes = (size_t)ring_pages * (size_t)ps;
  s->map_bytes = s->ring_bytes + (size_t)ps;
  size_t opened = 0;
  for (size_t i = 0; i < s->ncpu; i++) {
    struct cpu_stream *c = &s->cpu[i];
    c->fd = open_stream((int)i);
    if (c->fd == -ENODEV || c->fd == -ENOENT) { /* an offline CPU runs nothing */
      c->known = true;
      continue;
    }
    if (c->fd < 0) {
      snprintf(why, why_len, "perf_event_open (context switches, CPU %zu): %s%s", i,
               strerror(-c->fd), c->fd == -EACCES || c->fd == -EPERM ? " (needs CAP_PERFMON)" : "");
      pp_cpu_switches_close(s);
      return NULL;
    }
    void *r = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
    if (r == MAP_FAILED) {
      snprintf(why, why_len, "mmap of the switch ring (CPU %zu, %zu bytes): %s%s", i, s->map_bytes,
               strerror(errno), errno == EPERM ? " (needs CAP_IPC_LOCK)" : "");
      pp_cpu_switches_close(s);
      return NULL;
    }
    c->ring = r;
    opened++;
  }
  s->trust_after_ns = mono_ns() + GRACE_NS;
  if (!opened) {
    snprintf(why, why_len, "no online CPU");
    pp_cpu_switches_close(s);
    return NULL;
  }
  return s;
}

static struct tid_state *tid_slot(struct tid_state *tab, uint32_t tid) {
  for (uint32_t i = (tid * 2654435761u) & (TID_SLOTS - 1);; i = (i + 1) & (TID_SLOTS - 1))
    if (tab[i].tid == tid || tab[i].tid == 0) return &tab[i];
}

static void on_switch(struct pp_cpu_switches *s, struct cpu_stream *c, uint16_t misc,
                      uint32_t other, uint32_t tgid, uint32_t tid, uint64_t time) {
  bool out = (misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
  c->cur = out ? other : tgid; /* a switch out names the next one */
  c->known = true;
  if (tid == 0) return; /* the idle task */
  struct tid_state *t = tid_slot(s->tids, tid);
  if (t->tid == 0) {
    if (s->ntids >= TID_MAX) {
      s->tids_full = true;
      return;
    }
    *t = (struct tid_state){.tid = tid};
    s->ntids++;
  }
  if (time < t->time) return; /* older than what we know */
  t->time = time;
  t->tgid = tgid;
  t->waiting = out && (misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
}

static void drain(struct pp_cpu_switches *s, struct cpu_stream *c, bool *lost) {
  struct perf_event_mmap_page *pg = c->ring;
  const unsigned char *data = (const unsigned char *)c->ring + (s->map_bytes - s->ring_bytes);
  uint64_t size = s->ring_bytes;
  uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = pg->data_tail;
  if (head - tail > size) { /* cannot be: the kernel never laps the reader */
    *lost = true;
    tail = head;
  }
  while (head - tail >= sizeof(struct perf_event_header)) {
    unsigned char rec[64];
    struct perf_event_header h;
    memcpy(&h, data + (tail % size), sizeof(h)); /* 8-aligned: never wraps */
    if (h.size < sizeof(h) || h.size > head - tail || (h.size & 7)) {
      *lost = true; /* not a record: skip what is there */
      break;
    }
    size_t take = h.size < sizeof(rec) ? h.size : sizeof(rec);
    uint64_t at = tail % size;
    if (at + take <= size) {
      memcpy(rec, data + at, take);
    } else { /* wraps around the ring's end */
      for (size_t i = 0; i < take; i++)
        rec[i] = data[(tail + i) % size];
    }
    if (h.type == PERF_RECORD_SWITCH_CPU_WIDE && h.size >= sizeof(h) + 24) {
      /* next_prev_pid, next_prev_tid, then sample_id: pid, tid, time */
      uint32_t other, tgid, tid;
      uint64_t time;
      memcpy(&other, rec + sizeof(h), 4);
      memcpy(&tgid, rec + sizeof(h) + 8, 4);
      memcpy(&tid, rec + sizeof(h) + 12, 4);
      memcpy(&time, rec + sizeof(h) + 16, 8);
      on_switch(s, c, h.misc, other, tgid, tid, time);
    } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
      uint64_t n;
      memcpy(&n, rec + sizeof(h) + 8, 8);
      s->lost += n;
      *lost = true;
    }
    tail += h.size;
  }
  __atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
}

static int by_value(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Keeps the threads still waiting for a CPU, and the others switched since
 * the previous read (a record of another CPU read later may be older), and
 * lists the runnable thread groups. */
static void settle(struct pp_cpu_switches *s, uint64_t keep_after) {
  memset(s->spare, 0, TID_SLOTS * sizeof(*s->spare));
  size_t kept = 0, nr = 0;
  for (size_t i = 0; i < TID_SLOTS; i++) {
    const struct tid_state *t = &s->tids[i];
    if (t->tid == 0 || (!t->waiting && t->time < keep_after)) continue;
    *tid_slot(s->spare, t->tid) = *t;
    kept++;
    if (t->waiting) s->runnable[nr++] = t->tgid;
  }
  struct tid_state *x = s->tids;
  s->tids = s->spare;
  s->spare = x;
  s->ntids = kept;
  for (size_t i = 0; i < s->ncpu; i++)
    if (s->cpu[i].cur) s->runnable[nr++] = s->cpu[i].cur;
  qsort(s->runnable, nr, sizeof(*s->runnable), by_value);
  s->nrunnable = nr;
}

int pp_cpu_switches_read(struct pp_cpu_switches *s) {
  uint64_t now = mono_ns();
  bool lost = false, unknown = false;
  for (size_t i = 0; i < s->ncpu; i++) {
    struct cpu_stream *c = &s->cpu[i];
    if (c->ring) drain(s, c, &lost);
    if (!c->known) unknown = true;
  }
  if (lost || s->tids_full) { /* who waits is not known: start over */
    memset(s->tids, 0, TID_SLOTS * sizeof(*s->tids));
    s->ntids = 0;
    s->tids_full = false;
    s->trust_after_ns = now + GRACE_NS;
  }
  if (now < s->trust_after_ns) unknown = true;
  settle(s, s->prev_read_ns);
  s->prev_read_ns = now;
  return lost || unknown ? 1 : 0;
}

bool pp_cpu_switches_runnable(const struct pp_cpu_switches *s, uint32_t pid) {
  if (pid == 0) return false;
  return bsearch(&pid, s->runnable, s->nrunnable, sizeof(pid), by_value) != NULL;
}

uint64_t pp_cpu_switches_lost(const struct pp_cpu_switches *s) {
  return s->lost;
}
