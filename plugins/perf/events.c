/* SPDX-License-Identifier: Apache-2.0 */
/*
 * perf_event_open per CPU and the mmap ring buffers.
 *
 * The kernel writes records into one ring per CPU; each ring is in time
 * order but rings are not ordered against each other, and a process's
 * MMAP2 on one CPU must be seen before its samples on another. Every record
 * carries a timestamp (PERF_SAMPLE_TIME + sample_id_all), so the drain merges
 * the rings by time, in place, without copying records out (except one that
 * wraps around the ring end, which goes through a scratch buffer).
 *
 * Ring contents are treated as untrusted: a record whose size is impossible
 * ends the drain of that ring (its data is skipped, counted as malformed).
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perf.h"
#include "polyprof/kit/proc.h"

#define SCRATCH_SIZE 65536 /* header.size is 16 bits */

int perf_sys_event_open(struct perf_event_attr *a, pid_t pid, int cpu, int group,
                        unsigned long flags) {
  return (int)syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
}

/* Online CPUs from /sys/devices/system/cpu/online ("0-3,5,7-8"). */
int perf_online_cpus(int *cpus, int max) {
  char buf[1024];
  int n = 0;
  if (pp_read_file("/sys/devices/system/cpu/online", buf, sizeof(buf), NULL) < 0) {
    long c = sysconf(_SC_NPROCESSORS_CONF);
    for (long i = 0; i < c && n < max; i++)
      cpus[n++] = (int)i;
    return n;
  }
  char *p = buf;
  while (*p && n < max) {
    char *e;
    long a = strtol(p, &e, 10);
    if (e == p) break;
    long b = a;
    if (*e == '-') {
      p = e + 1;
      b = strtol(p, &e, 10);
    }
    for (long i = a; i <= b && n < max; i++)
      cpus[n++] = (int)i;
    p = e;
    if (*p == ',') p++;
  }
  return n;
}

struct named_event {
  const char *name;
  uint32_t type;
  uint64_t config;
};

static const struct named_event named_events[] = {
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
};

/* Registers libunwind needs on x86-64 (general purpose + ip + sp). */
static uint64_t user_regs_mask(void) {
#if defined(__x86_64__)
  uint64_t m = 0;
  static const int regs[] = {PERF_REG_X86_AX,  PERF_REG_X86_BX,  PERF_REG_X86_CX,  PERF_REG_X86_DX,
                             PERF_REG_X86_SI,  PERF_REG_X86_DI,  PERF_REG_X86_BP,  PERF_REG_X86_SP,
                             PERF_REG_X86_IP,  PERF_REG_X86_R8,  PERF_REG_X86_R9,  PERF_REG_X86_R10,
                             PERF_REG_X86_R11, PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14,
                             PERF_REG_X86_R15};
  for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
    m |= 1ull << regs[i];
  return m;
#elif defined(__aarch64__)
  return (1ull << PERF_REG_ARM64_MAX) - 1; /* x0-x30, sp, pc */
#else
  return 0;
#endif
}

void perf_events_explain(int err, const struct perf_events_config *cfg, const char *ev, char *out,
                         size_t cap) {
  char paranoid[16] = "?";
  pp_read_file("/proc/sys/kernel/perf_event_paranoid", paranoid, sizeof(paranoid), NULL);
  paranoid[strcspn(paranoid, "\n")] = '\0';
  switch (err) {
    case EACCES:
    case EPERM:
      if (cfg->npids) {
        snprintf(out, cap,
                 "the kernel refused perf events on the threads of --pids (%s; "
                 "kernel.perf_event_paranoid=%s): unprivileged users need it at 2 or lower "
                 "('sysctl kernel.perf_event_paranoid=2'; Debian defaults to 3) and may sample "
                 "only their own processes",
                 strerror(err), paranoid);
        break;
      }
      snprintf(out, cap,
               "the kernel refused system-wide perf events (%s; kernel.perf_event_paranoid=%s): "
               "run polyprof as root or with CAP_PERFMON (Linux >= 5.8) or CAP_SYS_ADMIN, or "
               "lower it with 'sysctl kernel.perf_event_paranoid=-1'; inside a container also "
               "allow perf_event_open in the seccomp profile",
               strerror(err), paranoid);
      break;
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
      snprintf(out, cap,
               "event '%s' is not available on this machine (%s): no hardware PMU (virtual "
               "machine?) or unknown event; use --perf-event cpu-clock",
               ev, strerror(err));
      break;
    case ENOSYS:
      snprintf(out, cap,
               "this kernel has no perf_event_open (CONFIG_PERF_EVENTS disabled or blocked by "
               "seccomp)");
      break;
    case EMFILE:
    case ENFILE:
      snprintf(out, cap,
               "out of file descriptors opening one perf event per CPU: raise "
               "'ulimit -n' (LimitNOFILE= in the service unit)");
      break;
    case EINVAL:
      snprintf(out, cap,
               "the kernel rejected the perf event attributes (%s) for event '%s' at %u Hz: "
               "check kernel.perf_event_max_sample_rate and --perf-dwarf-stack-size",
               strerror(err), ev, cfg->frequency);
      break;
    default:
      snprintf(out, cap, "perf_event_open failed: %s", strerror(err));
  }
}

int perf_events_attr(struct perf_events *ev, const struct perf_events_config *cfg,
                     struct perf_event_attr *out, char *err, size_t errlen) {
  memset(ev, 0, sizeof(*ev));
  const char *name = cfg->event && *cfg->event ? cfg->event : "cpu-clock";
  const struct named_event *ne = NULL;
  for (size_t i = 0; i < sizeof(named_events) / sizeof(named_events[0]); i++)
    if (strcmp(named_events[i].name, name) == 0) ne = &named_events[i];
  if (!ne) {
    snprintf(err, errlen,
             "unknown perf event '%s': use cpu-clock, task-clock, cycles, instructions, "
             "cache-misses, branch-misses, ref-cycles...",
             name);
    return -EINVAL;
  }
  snprintf(ev->event_name, sizeof(ev->event_name), "%s", name);
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = ne->type;
  a.config = ne->config;
  if (cfg->period) {
    a.sample_period = cfg->period;
  } else {
    a.freq = 1;
    a.sample_freq = cfg->frequency ? cfg->frequency : 11;
  }
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  if (cfg->regs_and_stack) {
    a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a.sample_regs_user = user_regs_mask();
    a.sample_stack_user = cfg->stack_size & ~7u;
  }
  if (!cfg->user_callchain) a.exclude_callchain_user = 1;
  a.exclude_kernel = cfg->exclude_kernel ? 1 : 0;
  a.exclude_hv = 1;
  a.sample_max_stack = cfg->max_stack;
  a.mmap = 1; /* with mmap2 set, the kernel sends MMAP2 records */
  a.mmap2 = 1;
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.sample_id_all = 1;
  a.disabled = 1;
  /* we poll from tick(), never sleep on the fd: wake as rarely as possible */
  a.watermark = 1;
  uint64_t data_bytes = (uint64_t)cfg->data_pages * (uint64_t)sysconf(_SC_PAGESIZE);
  a.wakeup_watermark = (uint32_t)(data_bytes / 2);
  ev->sample_type = a.sample_type;
  ev->regs_mask = a.sample_regs_user;

  *out = a;
  return 0;
}

int perf_ring_map(struct perf_events *ev, int fd, int cpu, uint32_t data_pages, char *err,
                  size_t errlen) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t len = page * (1 + (size_t)data_pages);
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    int e = errno;
    snprintf(err, errlen,
             "mmap of the perf ring buffer (%zu KiB per CPU) failed: %s; lower perf.mmap_pages "
             "or raise kernel.perf_event_mlock_kb",
             len / 1024, strerror(e));
    errno = e;
    return -1;
  }
  struct perf_ring *r = &ev->rings[ev->nrings++];
  r->fd = fd;
  r->cpu = cpu;
  r->base = m;
  r->data = (uint8_t *)m + page;
  r->size = (uint64_t)data_pages * page;
  return 0;
}

int perf_events_alloc(struct perf_events *ev, int ncpu, char *err, size_t errlen) {
  ev->rings = calloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof(*ev->rings));
  ev->scratch = malloc(SCRATCH_SIZE);
  if (!ev->rings || !ev->scratch) {
    snprintf(err, errlen, "out of memory");
    perf_events_close(ev);
    return -ENOMEM;
  }
  return 0;
}

int perf_events_open(struct perf_events *ev, const struct perf_events_config *cfg, char *err,
                     size_t errlen) {
  struct perf_event_attr a;
  int arc = perf_events_attr(ev, cfg, &a, err, errlen);
  if (arc < 0) return arc;
  const char *name = ev->event_name;
  bool software = a.type == PERF_TYPE_SOFTWARE;
  int cpus[4096];
  int ncpu = perf_online_cpus(cpus, 4096);
  arc = perf_events_alloc(ev, ncpu, err, errlen);
  if (arc < 0) return arc;
  int first_err = 0;
  for (int i = 0; i < ncpu; i++) {
    int fd = perf_sys_event_open(&a, -1, cpus[i], -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      /* a CPU going offline between the read and the open is not fatal */
      if (e == ENODEV && software) continue;
      first_err = e;
      break;
    }
    if (perf_ring_map(ev, fd, cpus[i], cfg->data_pages, err, errlen) < 0) {
      int e = errno;
      close(fd);
      perf_events_close(ev);
      return -e;
    }
  }
  if (first_err || ev->nrings == 0) {
    perf_events_explain(first_err ? first_err : ENODEV, cfg, name, err, errlen);
    perf_events_close(ev);
    return -(first_err ? first_err : ENODEV);
  }
  return 0;
}

void perf_events_enable(struct perf_events *ev) {
  for (int i = 0; i < ev->nrings; i++)
    ioctl(ev->rings[i].fd, PERF_EVENT_IOC_ENABLE, 0);
  for (size_t i = 0; i < ev->ntask_fds; i++)
    ioctl(ev->task_fds[i], PERF_EVENT_IOC_ENABLE, 0);
}

void perf_events_close(struct perf_events *ev) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  /* events redirected into a ring go first: the ring's own fd owns the mmap */
  for (size_t i = 0; i < ev->ntask_fds; i++) {
    ioctl(ev->task_fds[i], PERF_EVENT_IOC_DISABLE, 0);
    close(ev->task_fds[i]);
  }
  free(ev->task_fds);
  ev->task_fds = NULL;
  ev->ntask_fds = 0;
  for (int i = 0; i < ev->nrings; i++) {
    struct perf_ring *r = &ev->rings[i];
    ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0);
    munmap(r->base, page + r->size);
    close(r->fd);
  }
  free(ev->rings);
  free(ev->scratch);
  ev->rings = NULL;
  ev->scratch = NULL;
  ev->nrings = 0;
}

/* Copies len bytes at ring position pos (wrapping). */
static void ring_copy(const struct perf_ring *r, uint64_t pos, void *dst, size_t len) {
  uint64_t off = pos & (r->size - 1);
  size_t first = (size_t)(r->size - off);
  if (first >= len) {
    memcpy(dst, r->data + off, len);
  } else {
    memcpy(dst, r->data + off, first);
    memcpy((uint8_t *)dst + first, r->data, len - first);
  }
}

/* Reads the header and timestamp of the record at tail. Returns 0, or -1
 * if the ring is empty or its data is inconsistent (then it is skipped). */
static int ring_peek(struct perf_events *ev, struct perf_ring *r) {
  r->has_next = 0;
  if (r->head - r->tail < sizeof(struct perf_event_header)) return -1;
  struct perf_event_header h;
  ring_copy(r, r->tail, &h, sizeof(h));
  if (h.size < sizeof(h) || h.size > r->head - r->tail || (h.size & 7)) {
    ev->malformed++;
    r->tail = r->head; /* resynchronising inside a ring is not possible */
    return -1;
  }
  uint64_t t = 0;
  if (h.type == PERF_RECORD_SAMPLE) {
    /* ip, pid/tid, time */
    if (h.size >= sizeof(h) + 24) ring_copy(r, r->tail + sizeof(h) + 16, &t, 8);
  } else if (h.size >= sizeof(h) + 8) {
    /* sample_id trailer ends with the time (TID, TIME are the only ids) */
    ring_copy(r, r->tail + h.size - 8, &t, 8);
  }
  r->next_time = t;
  r->has_next = 1;
  return 0;
}

size_t perf_events_drain(struct perf_events *ev, perf_record_fn fn, void *arg) {
  size_t count = 0;
  for (int i = 0; i < ev->nrings; i++) {
    struct perf_ring *r = &ev->rings[i];
    struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *)r->base;
    r->head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    r->tail = mp->data_tail;
    if (r->head - r->tail > r->size) { /* cannot happen unless the page is corrupt */
      ev->malformed++;
      r->tail = r->head;
    }
    ring_peek(ev, r);
  }
  for (;;) {
    struct perf_ring *best = NULL;
    for (int i = 0; i < ev->nrings; i++) {
      struct perf_ring *r = &ev->rings[i];
      if (r->has_next && (!best || r->next_time < best->next_time)) best = r;
    }
    if (!best) break;
    struct perf_event_header h;
    ring_copy(best, best->tail, &h, sizeof(h));
    uint64_t off = best->tail & (best->size - 1);
    const uint8_t *rec;
    if (off + h.size <= best->size) {
      rec = best->data + off;
    } else {
      ring_copy(best, best->tail, ev->scratch, h.size);
      rec = ev->scratch;
    }
    fn(arg, &h, rec);
    count++;
    best->tail += h.size;
    ring_peek(ev, best);
  }
  for (int i = 0; i < ev->nrings; i++) {
    struct perf_ring *r = &ev->rings[i];
    struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *)r->base;
    __atomic_store_n(&mp->data_tail, r->tail, __ATOMIC_RELEASE);
  }
  return count;
}
