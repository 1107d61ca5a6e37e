/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Native allocation profile: what calls malloc, weighted by bytes, for the
 * processes given with --pids (or the program of `polyprof run`/`attach`).
 *
 * The kernel facility: the uprobe PMU of perf_event_open (Linux 4.17+), a
 * probe on the entry of each allocation function of the allocator library
 * the process maps (alloc_probes.c), opened per thread of the process. A
 * uprobe on a per-thread event is placed in that process only: other
 * processes mapping the same C library run untouched. Each event samples
 * one call in `period` (the period of each thread's events is drawn again
 * about every second within period/2..3*period/2, so it is never in step
 * with a program's own allocation pattern), with the user registers
 * holding the arguments, the 8 bytes at the stack pointer (the return
 * address into the caller: at the function's first instruction no frame
 * is set up, so the frame-pointer walk starts at the caller's caller) and
 * the frame-pointer callchain. A sample stands for `period` calls: it is
 * counted as its size times its period bytes, an estimate of the bytes
 * the stack allocated. (PERF_SAMPLE_PERIOD is not asked: with a fixed
 * period it makes a software event sample every call.)
 *
 * Cost: every call of a probed function traps into the kernel, sampled or
 * not (measured in docs/performance.md), which is why this is per process
 * and never host-wide. Events are not inherited: the kernel would open a
 * child's copy in the context of the forking target, where it cannot read
 * the probe's path, and fail the target's fork. Threads and allocator
 * libraries that appear later are found by a scan every tick, so a thread
 * is covered from at most one drain interval after it started. Child
 * processes are probed when the pid set follows them (perf.follow_children:
 * `polyprof run`, follow.c), from the first scan after their FORK record,
 * and forgotten once they leave the set.
 *
 * Bounded: at most max_threads threads (each a ring of `pages` pages and
 * one descriptor per probe), a fixed stack table; what does not fit is
 * counted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <asm/perf_regs.h>

#include "perf.h"
#include "polyprof/kit/cap_step.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/proc_tree.h"

#define ALLOC_FIND_TRIES 50         /* ticks a process may take to map its allocator */
#define ALLOC_MAX_SIZE (1ull << 40) /* a larger request cannot succeed: not counted */
#define ALLOC_MAX_IPS 128
#define ALLOC_MAX_TIDS 4096           /* threads of one process listed per scan */
#define ALLOC_WINDOW_NS 1000000000ull /* the duty cycle's period */

struct alloc_proc {
  uint32_t pid;
  struct alloc_file files[ALLOC_MAX_FILES];
  size_t nfiles;
  uint32_t tries;
  bool gone, warned;
};

struct alloc_thread {
  uint32_t tid, pid;
  uint64_t seen; /* scan tick */
  struct perf_events ev;
  uint64_t ids[ALLOC_MAX_FILES * ALLOC_MAX_PROBES];
  const struct alloc_probe *probes[ALLOC_MAX_FILES * ALLOC_MAX_PROBES];
  uint64_t periods[ALLOC_MAX_FILES * ALLOC_MAX_PROBES];
  int fds[ALLOC_MAX_FILES * ALLOC_MAX_PROBES];
  size_t nids;
};

#if defined(__x86_64__)
#define ARG_REGS ((1ull << PERF_REG_X86_DX) | (1ull << PERF_REG_X86_SI) | (1ull << PERF_REG_X86_DI))
/* registers come in bit order: dx, si, di; argument i is di, si, dx */
static const int arg_slot[3] = {2, 1, 0};
#else
#define ARG_REGS 0ull
static const int arg_slot[3] = {0, 0, 0};
#endif

static uint64_t now_ns(void);

static int uprobe_pmu_type(void) {
  char buf[32];
  if (pp_read_file("/sys/bus/event_source/devices/uprobe/type", buf, sizeof(buf), NULL) < 0)
    return -ENOENT;
  char *end;
  long t = strtol(buf, &end, 10);
  return end != buf && t > 0 && t < INT32_MAX ? (int)t : -ENOENT;
}

int perf_alloc_open(struct perf_state *st, char *err, size_t errlen) {
  struct perf_alloc *a = &st->alloc;
#if !defined(__x86_64__)
  snprintf(err, errlen, "native allocation arguments are read on x86-64 only");
  return -EOPNOTSUPP;
#endif
  int t = uprobe_pmu_type();
  if (t < 0) {
    snprintf(err, errlen,
             "this kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe: Linux 4.17+ "
             "with CONFIG_UPROBE_EVENTS)");
    return t;
  }
  if (!st->npids) {
    snprintf(err, errlen, "native allocations are profiled for --pids or `polyprof run` only");
    return -EINVAL;
  }
  memset(a, 0, sizeof(*a));
  a->pmu_type = t;
  a->period = st->alloc_period;
  a->rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
  a->pages = st->alloc_pages;
  a->max_threads = st->alloc_max_threads;
  perf_stacks_init(&a->stacks, 65536);
  a->on_len_ns = ALLOC_WINDOW_NS / 100 * st->alloc_duty;
  a->origin_ns = a->session_ns = now_ns();
  a->open = true;
  return 0;
}

static void thread_close(struct perf_alloc *a, struct alloc_thread *t) {
  perf_events_close(&t->ev);
  perf_idmap_del(&a->threads, t->tid);
  free(t);
}

static void proc_close(struct perf_alloc *a, struct alloc_proc *p) {
  for (size_t i = 0; i < p->nfiles; i++)
    close(p->files[i].fd);
  p->nfiles = 0;
}

void perf_alloc_close(struct perf_state *st) {
  struct perf_alloc *a = &st->alloc;
  for (size_t i = 0; i < a->threads.cap; i++) {
    struct alloc_thread *t = a->threads.slots[i].val;
    if (t) {
      perf_events_close(&t->ev);
      free(t);
    }
  }
  for (size_t i = 0; i < a->procs.cap; i++) {
    struct alloc_proc *p = a->procs.slots[i].val;
    if (p) {
      proc_close(a, p);
      free(p);
    }
  }
  perf_idmap_free(&a->threads);
  perf_idmap_free(&a->procs);
  if (a->open) perf_stacks_fini(&a->stacks);
  memset(a, 0, sizeof(*a));
}

/* One probe event on one thread; fd or -errno. */
static int open_probe(const struct perf_alloc *a, const struct perf_state *st,
                      const struct alloc_file *f, const struct alloc_probe *pr, uint32_t tid) {
  char path[48];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
  struct perf_event_attr at;
  memset(&at, 0, sizeof(at));
  at.size = sizeof(at);
  at.type = (uint32_t)a->pmu_type;
  at.config = 0; /* entry probe */
  at.config1 = (uint64_t)(uintptr_t)path;
  at.config2 = pr->offset;
  at.sample_period = a->period;
  at.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
                   PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  at.sample_regs_user = ARG_REGS;
  at.sample_stack_user = 8;
  at.exclude_callchain_kernel = 1;
  at.sample_max_stack = (uint16_t)(st->max_depth < ALLOC_MAX_IPS ? st->max_depth : ALLOC_MAX_IPS);
  at.sample_id_all = 1;
  at.disabled = 1;
  at.watermark = 1;
  at.wakeup_watermark = (uint32_t)((uint64_t)a->pages * (uint64_t)sysconf(_SC_PAGESIZE) / 2);
  /* uprobe events are CAP_SYS_ADMIN's (not CAP_PERFMON's): the worker
   * holds it as a step privilege, effective for this call only */
  struct pp_cap_step cs;
  pp_cap_step_begin(&cs, PP_CAP_NEEDS_NSENTER);
  int fd = perf_sys_event_open(&at, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  int e = errno;
  pp_cap_step_end(&cs);
  return fd < 0 ? -e : fd;
}

/* A new period for each of t's events, drawn from period/2..3*period/2:
 * a fixed period can be in step with a program's own pattern (two call
 * sites taking turns and an even period would show one of them only). */
static void jitter(struct perf_alloc *a, struct alloc_thread *t) {
  for (size_t i = 0; i < t->nids; i++) {
    a->rng ^= a->rng << 13;
    a->rng ^= a->rng >> 7;
    a->rng ^= a->rng << 17;
    uint64_t p = a->period / 2 + a->rng % (a->period + 1);
    if (p == 0) p = 1;
    if (ioctl(t->fds[i], PERF_EVENT_IOC_PERIOD, &p) == 0) t->periods[i] = p;
  }
}

/* Every probe of the process on one new thread, into one ring. */
static int thread_open(struct perf_state *st, struct alloc_proc *p, uint32_t tid, char *err,
                       size_t errlen) {
  struct perf_alloc *a = &st->alloc;
  struct alloc_thread *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->tid = tid;
  t->pid = p->pid;
  snprintf(t->ev.event_name, sizeof(t->ev.event_name), "uprobe");
  int rc = perf_events_alloc(&t->ev, 1, err, errlen);
  if (rc < 0) {
    free(t);
    return rc;
  }
  for (size_t i = 0; i < p->nfiles && rc == 0; i++) {
    for (size_t k = 0; k < p->files[i].nprobes && rc == 0; k++) {
      const struct alloc_probe *pr = &p->files[i].probes[k];
      int fd = open_probe(a, st, &p->files[i], pr, tid);
      if (fd < 0) {
        rc = fd;
        bool priv = fd == -EACCES || fd == -EPERM;
        snprintf(err, errlen, "uprobe on %s in %s: %s%s", pr->name, p->files[i].path, strerror(-fd),
                 priv ? " (uprobe events need CAP_SYS_ADMIN: run the agent as root)" : "");
        break;
      }
      uint64_t id = 0;
      if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0) {
        rc = -errno;
        close(fd);
        break;
      }
      if (t->ev.nrings == 0) {
        if (perf_ring_map(&t->ev, fd, -1, a->pages, err, errlen) < 0) {
          rc = -errno;
          close(fd);
          break;
        }
      } else {
        int *g = realloc(t->ev.task_fds, (t->ev.ntask_fds + 1) * sizeof(*g));
        if (!g || ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, t->ev.rings[0].fd) < 0) {
          rc = g ? -errno : -ENOMEM;
          if (g) t->ev.task_fds = g;
          close(fd);
          break;
        }
        t->ev.task_fds = g;
        t->ev.task_fds[t->ev.ntask_fds++] = fd;
      }
      t->ids[t->nids] = id;
      t->periods[t->nids] = a->period;
      t->fds[t->nids] = fd;
      t->probes[t->nids++] = pr;
    }
  }
  if (rc == 0 && perf_idmap_put(&a->threads, tid, t) < 0) rc = -ENOMEM;
  if (rc < 0) {
    perf_events_close(&t->ev);
    free(t);
    return rc;
  }
  jitter(a, t);
  perf_events_enable(&t->ev);
  return 0;
}

/* ---- samples ---- */

struct drain_ctx {
  struct perf_state *st;
  struct alloc_thread *t;
};

static uint64_t get_u64(const uint8_t *rec, size_t off) {
  uint64_t v;
  memcpy(&v, rec + off, 8);
  return v;
}

/* The bytes a sampled call asks for, from its argument registers. */
static uint64_t request_size(const struct alloc_probe *pr, const uint64_t *regs) {
  uint64_t size = regs[arg_slot[pr->size_arg < 3 ? pr->size_arg : 0]];
  if (pr->count_arg != ALLOC_NO_ARG) {
    uint64_t count = regs[arg_slot[pr->count_arg < 3 ? pr->count_arg : 0]];
    if (count && size > UINT64_MAX / count) return UINT64_MAX; /* calloc refuses it */
    size *= count;
  }
  return size;
}

static void on_sample(struct perf_state *st, struct alloc_thread *t, const uint8_t *rec,
                      size_t size) {
  struct perf_alloc *a = &st->alloc;
  size_t off = sizeof(struct perf_event_header);
  /* ip, pid/tid, time, id, nr */
  if (size < off + 40) goto bad;
  uint32_t pt[2];
  memcpy(pt, rec + off + 8, 8);
  uint64_t id = get_u64(rec, off + 24), nchain = get_u64(rec, off + 32);
  off += 40;
  if (nchain > (size - off) / 8) goto bad;
  const uint8_t *chain = rec + off;
  off += (size_t)nchain * 8;
  /* regs: abi, then the argument registers if the abi says they are there */
  if (size - off < 8) goto bad;
  uint64_t abi = get_u64(rec, off), regs[3] = {0, 0, 0};
  off += 8;
  if (abi) {
    if (size - off < 24) goto bad;
    for (int i = 0; i < 3; i++)
      regs[i] = get_u64(rec, off + (size_t)i * 8);
    off += 24;
  }
  /* stack: size, bytes, dyn_size */
  uint64_t ret = 0;
  if (size - off < 8) goto bad;
  uint64_t ssize = get_u64(rec, off);
  off += 8;
  if (ssize) {
    if (ssize > size - off || size - off - ssize < 8) goto bad;
    uint64_t dyn = get_u64(rec, off + ssize);
    if (dyn >= 8 && ssize >= 8) ret = get_u64(rec, off);
  }
  const struct alloc_probe *pr = NULL;
  uint64_t period = 0;
  for (size_t i = 0; i < t->nids && !pr; i++)
    if (t->ids[i] == id) {
      pr = t->probes[i];
      period = t->periods[i];
    }
  if (!pr || !abi) goto bad;
  a->samples++;
  uint64_t bytes = request_size(pr, regs);
  if (bytes > ALLOC_MAX_SIZE) {
    a->oversize++;
    return;
  }
  if (!bytes || !period) return;

  uint32_t pid = pt[0], tid = pt[1];
  struct perf_proc *p = perf_proc_get(st, pid, true);
  if (!p) return;
  bool maps_ok = perf_proc_need_maps(st, p) == 0;
  uint32_t fr[ALLOC_MAX_IPS + 1], n = 0;
  bool user = false;
  for (uint64_t i = 0; i < nchain && n < ALLOC_MAX_IPS; i++) {
    uint64_t ip = get_u64(chain, (size_t)i * 8);
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      user = ip == (uint64_t)PERF_CONTEXT_USER;
      continue;
    }
    if (!user) continue;
    bool leaf = n == 0;
    fr[n++] = maps_ok ? perf_sym_user(st, p, ip, leaf) : PERF_FRAME_ID_UNKNOWN;
    /* the caller, which the frame-pointer walk skips at a function's entry
     * (a kernel that adds it itself puts it right here) */
    if (n == 1 && ret) {
      uint64_t next = 0;
      for (uint64_t k = i + 1; k < nchain && !next; k++) {
        uint64_t v = get_u64(chain, (size_t)k * 8);
        if (v < (uint64_t)PERF_CONTEXT_MAX) next = v;
      }
      if (next != ret) fr[n++] = maps_ok ? perf_sym_user(st, p, ret, false) : PERF_FRAME_ID_UNKNOWN;
    }
  }
  n = perf_sym_fold_jit(st, fr, n);
  if (n == 0) fr[n++] = PERF_FRAME_ID_UNKNOWN;
  p->sampled = true;
  p->last_used = st->tick;
  uint64_t w = bytes > UINT64_MAX / period ? UINT64_MAX : bytes * period;
  perf_stacks_add_n(&a->stacks, pid, perf_thread_comm(st, pid, tid), fr, n, w);
  return;
bad:
  a->malformed++;
}

static void on_record(void *arg, const struct perf_event_header *h, const uint8_t *rec) {
  struct drain_ctx *c = arg;
  struct perf_alloc *a = &c->st->alloc;
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      on_sample(c->st, c->t, rec, h->size);
      break;
    case PERF_RECORD_LOST:
      if (h->size >= sizeof(*h) + 16) a->lost += get_u64(rec, sizeof(*h) + 8);
      break;
    case PERF_RECORD_THROTTLE:
      a->throttled++;
      break;
    default:
      break;
  }
}

static void thread_drain(struct perf_state *st, struct alloc_thread *t) {
  struct drain_ctx c = {st, t};
  perf_events_drain(&t->ev, on_record, &c);
}

/* ---- scans ---- */

/* Threads of p not seen in this scan have exited: their last samples are
 * read before their events go. */
static void drop_unseen(struct perf_state *st, uint32_t pid) {
  struct perf_alloc *a = &st->alloc;
  for (size_t i = 0; i < a->threads.cap;) {
    struct alloc_thread *t = a->threads.slots[i].val;
    if (!t || t->pid != pid || t->seen == a->scan_tick) {
      i++;
      continue;
    }
    thread_drain(st, t);
    thread_close(a, t); /* the deletion shifts a later slot into i: look at i again */
  }
}

/* The allocator libraries of p and their probes, looked for until found
 * (a program just started may not have mapped them yet). */
static bool proc_ready(struct perf_state *st, struct alloc_proc *p) {
  if (p->nfiles) return true;
  if (p->gone || p->tries >= ALLOC_FIND_TRIES) return false;
  char why[512];
  size_t n = 0;
  int rc = perf_alloc_find_probes(p->pid, p->files, ALLOC_MAX_FILES, &n, why, sizeof(why));
  p->nfiles = n;
  if (rc < 0) {
    char dir[32];
    snprintf(dir, sizeof(dir), "/proc/%u", p->pid);
    if (access(dir, F_OK) < 0) {
      p->gone = true;
      return false;
    }
    /* none and no loader that could still map one: statically linked */
    if (rc == -ENOENT) p->tries = ALLOC_FIND_TRIES - 1;
    if (++p->tries == ALLOC_FIND_TRIES)
      PP_WARNING(st->host, "native alloc: pid %u (%s) not profiled: %s", p->pid,
                 perf_thread_comm(st, p->pid, p->pid), why);
    return false;
  }
  for (size_t i = 0; i < p->nfiles; i++)
    PP_INFO(st->host, "native alloc: pid %u: %zu allocation functions of %s probed", p->pid,
            p->files[i].nprobes, p->files[i].path);
  return true;
}

/* Probes on the threads of p that have none, events of exited ones closed. */
static void scan_proc(struct perf_state *st, struct alloc_proc *p, uint32_t *tids) {
  struct perf_alloc *a = &st->alloc;
  size_t n = 0;
  if (pp_proc_threads(p->pid, tids, ALLOC_MAX_TIDS, &n) < 0) {
    p->gone = true;
    drop_unseen(st, p->pid);
    proc_close(a, p);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    struct alloc_thread *t = perf_idmap_get(&a->threads, tids[i]);
    if (t) {
      t->seen = a->scan_tick;
      continue;
    }
    if (a->threads.n >= a->max_threads) {
      a->threads_refused++;
      continue;
    }
    char err[512] = "";
    int rc = thread_open(st, p, tids[i], err, sizeof(err));
    if (rc == -ESRCH || rc == -ENOENT) continue; /* it exited meanwhile */
    if (rc < 0) {
      a->threads_refused++;
      if (!p->warned) {
        p->warned = true;
        PP_WARNING(st->host, "native alloc: pid %u thread %u not profiled: %s", p->pid, tids[i],
                   err[0] ? err : strerror(-rc));
      }
      continue;
    }
    t = perf_idmap_get(&a->threads, tids[i]);
    if (t) t->seen = a->scan_tick;
  }
  drop_unseen(st, p->pid);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Ends an on-window: the samples are read, every thread's events closed
 * (which takes the breakpoints out of the process). */
static void window_off(struct perf_state *st, uint64_t now) {
  struct perf_alloc *a = &st->alloc;
  for (size_t i = 0; i < a->threads.cap;) {
    struct alloc_thread *t = a->threads.slots[i].val;
    if (!t) {
      i++;
      continue;
    }
    thread_drain(st, t);
    thread_close(a, t); /* the deletion may shift a later slot into i */
  }
  a->on_ns += now - a->on_since;
  a->on = false;
}

void perf_alloc_tick(struct perf_state *st) {
  struct perf_alloc *a = &st->alloc;
  if (!a->open) return;
  static uint32_t tids[ALLOC_MAX_TIDS]; /* the worker drives the plugin from one thread */
  uint64_t now = now_ns();
  bool want_on = (now - a->origin_ns) % ALLOC_WINDOW_NS < a->on_len_ns;
  if (a->on && !want_on) window_off(st, now);
  if (!a->on && want_on) {
    a->on = true;
    a->on_since = now;
  }
  a->scan_tick++;
  for (size_t i = 0; i < st->npids; i++) {
    struct alloc_proc *p = perf_idmap_get(&a->procs, st->pids[i]);
    if (!p) {
      p = calloc(1, sizeof(*p));
      if (!p) continue;
      p->pid = st->pids[i];
      if (perf_idmap_put(&a->procs, p->pid, p) < 0) {
        free(p);
        continue;
      }
    }
    if (proc_ready(st, p) && a->on) scan_proc(st, p, tids);
  }
  /* a followed process that left the pid set (it exited): its threads' last
   * samples read (none was scanned in this tick), its probed files closed */
  for (size_t i = 0; i < a->procs.cap;) {
    struct alloc_proc *p = a->procs.slots[i].val;
    if (!p || perf_pid_wanted(st, p->pid)) {
      i++;
      continue;
    }
    drop_unseen(st, p->pid);
    proc_close(a, p);
    perf_idmap_del(&a->procs, p->pid); /* shifts a later slot into i: look at i again */
    free(p);
  }
  for (size_t i = 0; i < a->threads.cap; i++) {
    struct alloc_thread *t = a->threads.slots[i].val;
    if (!t) continue;
    thread_drain(st, t);
    /* about once a second for each thread, right after its samples are read */
    if ((a->scan_tick + t->tid) % 10 == 0) jitter(a, t);
  }
}

void perf_alloc_emit(struct perf_state *st, struct pp_sink *sink) {
  struct perf_alloc *a = &st->alloc;
  if (!a->open) return;
  perf_alloc_tick(st);
  /* the probes were in place for on_ns of the session's span: the bytes
   * they saw stand for the whole span */
  uint64_t now = now_ns(), on = a->on_ns + (a->on ? now - a->on_since : 0);
  uint64_t span = now - a->session_ns;
  double scale = on && span > on ? (double)span / (double)on : 1.0;
  for (size_t i = 0; i < a->stacks.n; i++) {
    struct perf_stack *s = &a->stacks.v[i];
    double c = (double)s->count * scale;
    uint64_t count = c >= 1.8e19 ? UINT64_MAX : (uint64_t)(c + 0.5);
    if (count) perf_emit_stack(st, sink, &a->stacks, s, count, PP_PROFILE_ALLOC);
  }
  const struct pp_host *h = st->host;
  h->add_counter(sink, "alloc_samples", a->samples);
  h->add_counter(sink, "alloc_threads", a->threads.n);
  h->add_counter(sink, "alloc_threads_refused", a->threads_refused);
  h->add_counter(sink, "alloc_lost", a->lost);
  h->add_counter(sink, "alloc_throttled", a->throttled);
  h->add_counter(sink, "alloc_oversize", a->oversize);
  h->add_counter(sink, "alloc_malformed", a->malformed);
  h->add_counter(sink, "alloc_dropped_stacks", a->stacks.dropped);
  h->add_counter(sink, "alloc_probed_ms", on / 1000000);
  if (a->lost || a->threads_refused || a->stacks.dropped)
    PP_WARNING(h,
               "native alloc: %llu samples, %llu lost (ring full: raise perf.alloc_mmap_pages), "
               "%llu threads not probed (perf.alloc_max_threads), %llu stacks dropped",
               (unsigned long long)a->samples, (unsigned long long)a->lost,
               (unsigned long long)a->threads_refused, (unsigned long long)a->stacks.dropped);
  perf_stacks_reset(&a->stacks);
  a->samples = a->lost = a->throttled = a->oversize = a->malformed = a->threads_refused = 0;
  a->session_ns = now;
  a->on_ns = 0;
  if (a->on) a->on_since = now;
}
