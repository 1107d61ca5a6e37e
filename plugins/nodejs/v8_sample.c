/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-thread perf sampling of a Node process: user registers and a copy of
 * the top of the user stack (see v8_sample.h). Rings are drained from the
 * plugin's tick without system calls (the head is read from the mapped
 * metadata page); the thread list is followed with a readdir of
 * /proc/PID/task at each rescan. Records are parsed with bounds: their
 * sizes come from the kernel, but a bug must not become an overrun.
 */
#include "v8_sample.h"

#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/plugin.h"

#if defined(__x86_64__)
#include <asm/perf_regs.h>
#define REG_BP PERF_REG_X86_BP
#define REG_SP PERF_REG_X86_SP
#define REG_IP PERF_REG_X86_IP
#elif defined(__aarch64__)
#include <asm/perf_regs.h>
#define REG_BP PERF_REG_ARM64_X29
#define REG_SP PERF_REG_ARM64_SP
#define REG_IP PERF_REG_ARM64_PC
#else
#error "v8 mode: unsupported architecture"
#endif

static size_t page_size(void) {
  static size_t ps;
  if (!ps) {
    long v = sysconf(_SC_PAGESIZE);
    ps = v > 0 ? (size_t)v : 4096;
  }
  return ps;
}

/* A mapped sampling event of thread tid: the cpu-clock one, or the
 * context-switch one (switches). */
static int map_event(struct v8_sampler *s, uint32_t tid, int switches, int *fd_out,
                     void **ring_out) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = switches ? PERF_COUNT_SW_CONTEXT_SWITCHES : PERF_COUNT_SW_CPU_CLOCK;
  a.sample_period = switches ? 1 : s->period_ns;
  a.sample_type =
      PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = (1ull << REG_BP) | (1ull << REG_SP) | (1ull << REG_IP);
  a.sample_stack_user = s->stack_bytes;
  a.exclude_hv = 1;
  a.disabled = 0;
  /* times comparable with the agent's clock, and on the switch records */
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.sample_id_all = 1;
  a.context_switch = switches ? 1 : 0;
  long fd = syscall(SYS_perf_event_open, &a, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = page_size() + (switches ? s->sw_ring_bytes : s->ring_bytes);
  void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
  if (ring == MAP_FAILED) {
    int e = -errno;
    close((int)fd);
    return e;
  }
  *fd_out = (int)fd;
  *ring_out = ring;
  return 0;
}

static void unmap_event(size_t ring_bytes, int *fd, void **ring) {
  if (*ring) munmap(*ring, page_size() + ring_bytes);
  if (*fd >= 0) close(*fd);
  *ring = NULL;
  *fd = -1;
}

static int open_event(struct v8_sampler *s, uint32_t tid, struct v8_thread_ev *t) {
  memset(t, 0, sizeof(*t));
  t->fd = t->sw.fd = -1;
  int rc = map_event(s, tid, 0, &t->fd, &t->ring);
  if (rc == 0 && (s->flags & (V8_SAMPLE_WALL | V8_SAMPLE_OFFCPU)))
    rc = map_event(s, tid, 1, &t->sw.fd, &t->sw.ring);
  if (rc < 0) {
    unmap_event(s->ring_bytes, &t->fd, &t->ring);
    return rc;
  }
  t->tid = tid;
  t->seen = 1;
  return 0;
}

static void close_event(struct v8_sampler *s, struct v8_thread_ev *t) {
  unmap_event(s->ring_bytes, &t->fd, &t->ring);
  unmap_event(s->sw_ring_bytes, &t->sw.fd, &t->sw.ring);
  free(t->sw.stack);
  t->sw.stack = NULL;
  t->sw.pending = 0;
}

/* Threads Node (22 and later) names for work that never runs JS: V8's
 * GC and compiler helpers, its delayed-task scheduler, the SIGUSR1
 * watchdog, libuv's thread pool. Unnamed threads (Node 18 and 20 name
 * none) are sampled. */
static int skip_thread(uint32_t pid, uint32_t tid) {
  static const char *const names[] = {"V8Worker", "DelayedTaskSche", "SignalInspector",
                                      "libuv-worker"};
  char path[64], comm[32];
  snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(comm, 1, sizeof(comm) - 1, f);
  fclose(f);
  comm[n] = '\0';
  comm[strcspn(comm, "\n")] = '\0';
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(comm, names[i]) == 0) return 1;
  return 0;
}

int v8_sampler_rescan(struct v8_sampler *s) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", s->pid);
  DIR *d = opendir(path);
  if (!d) return errno == ENOENT ? -ESRCH : -errno;
  for (size_t i = 0; i < s->nth; i++)
    s->th[i].seen = 0;
  int first_err = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    unsigned long tid = strtoul(de->d_name, &end, 10);
    if (*end || tid == 0 || tid > UINT32_MAX) continue;
    size_t i;
    for (i = 0; i < s->nth; i++)
      if (s->th[i].tid == tid) break;
    if (i < s->nth) {
      s->th[i].seen = 1;
      continue;
    }
    if (s->nth >= s->max_threads || s->nth >= V8_SAMPLE_MAX_THREADS) continue;
    if (tid != s->pid && skip_thread(s->pid, (uint32_t)tid)) continue;
    int rc = open_event(s, (uint32_t)tid, &s->th[s->nth]);
    if (rc == 0)
      s->nth++;
    else if (rc != -ESRCH && !first_err)
      first_err = rc;
  }
  closedir(d);
  /* threads that ended: their events can never fire again */
  for (size_t i = 0; i < s->nth;) {
    if (s->th[i].seen) {
      i++;
      continue;
    }
    close_event(s, &s->th[i]);
    s->th[i] = s->th[--s->nth];
  }
  if (s->nth == 0) return first_err ? first_err : -ESRCH;
  return (int)s->nth;
}

int v8_sampler_open(struct v8_sampler *s, uint32_t pid, uint32_t hz, uint32_t stack_bytes,
                    uint32_t max_threads, uint32_t flags) {
  memset(s, 0, sizeof(*s));
  s->pid = pid;
  s->flags = flags;
  s->period_ns = 1000000000ull / (hz ? hz : 11);
  s->stack_bytes = stack_bytes & ~7u;
  s->max_threads = max_threads;
  /* room for five full records: drained every three sampling periods
   * (nodejs_v8_tick_ns), with room for the agent being late. The ring is
   * locked kernel memory (128 KiB a thread with the default 24 KiB of
   * stack), so threads that never run JS get none (see skip_thread) */
  size_t rec = s->stack_bytes + 128, ring = page_size();
  while (ring < 5 * rec)
    ring <<= 1;
  s->ring_bytes = ring;
  /* a switch-out record each time the thread blocks or is preempted (a
   * busy thread on a loaded host: every few ms), drained every 10 ms in
   * these modes (nodejs_v8_tick_ns): room for eight */
  while (ring < 8 * rec)
    ring <<= 1;
  s->sw_ring_bytes = ring;
  s->linear_cap = rec;
  s->linear = malloc(s->linear_cap);
  if (!s->linear) return -ENOMEM;
  int rc = v8_sampler_rescan(s);
  if (rc < 0) {
    v8_sampler_close(s);
    return rc;
  }
  return 0;
}

void v8_sampler_close(struct v8_sampler *s) {
  for (size_t i = 0; i < s->nth; i++)
    close_event(s, &s->th[i]);
  s->nth = 0;
  free(s->linear);
  s->linear = NULL;
}

static int get_u64(const unsigned char *p, size_t len, size_t *at, uint64_t *v) {
  if (*at + 8 > len) return -1;
  memcpy(v, p + *at, 8);
  *at += 8;
  return 0;
}

/* One PERF_RECORD_SAMPLE body (after the header) -> *rs (its stack points
 * into p); *time_ns is when it was taken. */
static int parse_sample(const unsigned char *p, size_t len, struct v8_raw_sample *rs,
                        uint64_t *time_ns) {
  size_t at = 0;
  uint64_t pidtid, abi;
  if (get_u64(p, len, &at, &pidtid) < 0 || get_u64(p, len, &at, time_ns) < 0 ||
      get_u64(p, len, &at, &abi) < 0)
    return -1;
  *rs = (struct v8_raw_sample){.tid = (uint32_t)(pidtid >> 32), .count = 1};
  if (abi == PERF_SAMPLE_REGS_ABI_NONE) return -1; /* a kernel thread: no user state */
  /* registers in ascending bit order: BP, SP, IP on both architectures */
  uint64_t r[3];
  for (int i = 0; i < 3; i++)
    if (get_u64(p, len, &at, &r[i]) < 0) return -1;
  rs->regs.bp = r[0];
  rs->regs.sp = r[1];
  rs->regs.ip = r[2];
  uint64_t size, dyn = 0;
  if (get_u64(p, len, &at, &size) < 0) return -1;
  if (size > len - at) return -1;
  const unsigned char *data = p + at;
  at += size;
  if (size && get_u64(p, len, &at, &dyn) < 0) return -1;
  if (dyn > size) dyn = size;
  rs->stack = data;
  rs->stack_len = (size_t)dyn;
  return 0;
}

/* ---- time off the CPU (context-switch events) ---- */

/* Credits dur_ns off the CPU to the stack t->sw keeps. */
static void credit(struct v8_sampler *s, struct v8_thread_ev *t, uint64_t dur_ns, v8_sample_fn fn,
                   void *ctx) {
  struct v8_switch *w = &t->sw;
  struct v8_raw_sample rs = {
      .tid = t->tid, .regs = w->regs, .stack = w->stack, .stack_len = w->stack_len, .off_cpu = 1};
  if (s->flags & V8_SAMPLE_WALL) {
    w->carry_ns += dur_ns;
    rs.count = w->carry_ns / s->period_ns;
    w->carry_ns %= s->period_ns;
    rs.type = PP_PROFILE_CPU;
    if (rs.count) fn(ctx, &rs);
  }
  if ((s->flags & V8_SAMPLE_OFFCPU) && !w->preempted && dur_ns >= 1000) {
    rs.count = dur_ns / 1000;
    rs.type = PP_PROFILE_OFFCPU;
    fn(ctx, &rs);
  }
}

/* A switch-out sample: its stack kept until the thread comes back. */
static void switched_out(struct v8_sampler *s, struct v8_thread_ev *t,
                         const struct v8_raw_sample *rs, uint64_t time_ns, v8_sample_fn fn,
                         void *ctx) {
  struct v8_switch *w = &t->sw;
  /* its switch-in was dropped: what is known of that time off ends here */
  if (w->pending && time_ns > w->out_ns) credit(s, t, time_ns - w->out_ns, fn, ctx);
  w->pending = 0;
  if (!w->stack && !(w->stack = malloc(s->stack_bytes))) return;
  w->stack_len = rs->stack_len < s->stack_bytes ? rs->stack_len : s->stack_bytes;
  memcpy(w->stack, rs->stack, w->stack_len);
  w->regs = rs->regs;
  w->out_ns = time_ns;
  w->preempted = 0;
  w->pending = 1;
}

/* A PERF_RECORD_SWITCH: out (the sample before it was the switch-out's) or
 * in (the time off ends). Its time is the sample_id's (TID, TIME). */
static void switch_record(struct v8_sampler *s, struct v8_thread_ev *t, uint16_t misc,
                          const unsigned char *p, size_t len, v8_sample_fn fn, void *ctx) {
  struct v8_switch *w = &t->sw;
  size_t at = 8; /* pid, tid */
  uint64_t time_ns;
  if (get_u64(p, len, &at, &time_ns) < 0) return;
  if (misc & PERF_RECORD_MISC_SWITCH_OUT) {
    if (w->pending) w->preempted = (misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
    return;
  }
  if (!w->pending) {
    s->switch_lost++;
    return;
  }
  if (time_ns > w->out_ns) credit(s, t, time_ns - w->out_ns, fn, ctx);
  w->pending = 0;
}

static size_t drain_one(struct v8_sampler *s, struct v8_thread_ev *t, void *ring, v8_sample_fn fn,
                        void *ctx) {
  int switches = ring == t->sw.ring;
  struct perf_event_mmap_page *pg = ring;
  const unsigned char *data = (const unsigned char *)ring + page_size();
  uint64_t size = switches ? s->sw_ring_bytes : s->ring_bytes;
  uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = pg->data_tail;
  size_t n = 0;
  if (head - tail > size) tail = head - size; /* cannot happen: the kernel stops writing */
  while (head - tail >= sizeof(struct perf_event_header)) {
    struct perf_event_header h;
    memcpy(&h, data + (tail % size), sizeof(h)); /* 8-aligned: never wraps */
    if (h.size < sizeof(h) || h.size > head - tail || (h.size & 7)) break;
    size_t body = h.size - sizeof(h);
    uint64_t off = (tail + sizeof(h)) % size;
    const unsigned char *p = data + off;
    if (off + body > size) {
      if (body > s->linear_cap) {
        tail += h.size;
        continue;
      }
      size_t first = (size_t)(size - off);
      memcpy(s->linear, p, first);
      memcpy(s->linear + first, data, body - first);
      p = s->linear;
    }
    struct v8_raw_sample rs;
    uint64_t time_ns;
    if (h.type == PERF_RECORD_SAMPLE) {
      if (parse_sample(p, body, &rs, &time_ns) == 0) {
        if (switches) {
          switched_out(s, t, &rs, time_ns, fn, ctx);
        } else {
          fn(ctx, &rs);
          n++;
        }
      }
    } else if (h.type == PERF_RECORD_SWITCH && switches) {
      switch_record(s, t, h.misc, p, body, fn, ctx);
    } else if (h.type == PERF_RECORD_LOST && body >= 16) {
      uint64_t lost;
      memcpy(&lost, p + 8, sizeof(lost));
      if (lost < (1u << 20)) s->lost += lost;
    }
    tail += h.size;
  }
  __atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
  return n;
}

size_t v8_sampler_drain(struct v8_sampler *s, v8_sample_fn fn, void *ctx) {
  size_t n = 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  for (size_t i = 0; i < s->nth; i++) {
    struct v8_thread_ev *t = &s->th[i];
    if (t->ring) n += drain_one(s, t, t->ring, fn, ctx);
    if (!t->sw.ring) continue;
    drain_one(s, t, t->sw.ring, fn, ctx);
    /* still off its CPU: its time so far, so a thread asleep for the
     * whole session is in it */
    if (t->sw.pending && now > t->sw.out_ns + s->period_ns) {
      credit(s, t, now - t->sw.out_ns, fn, ctx);
      t->sw.out_ns = now;
    }
  }
  return n;
}
