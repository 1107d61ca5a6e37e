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
#include <unistd.h>

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

static int open_event(struct v8_sampler *s, uint32_t tid, struct v8_thread_ev *t) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.sample_period = s->period_ns;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = (1ull << REG_BP) | (1ull << REG_SP) | (1ull << REG_IP);
  a.sample_stack_user = s->stack_bytes;
  a.exclude_hv = 1;
  a.disabled = 0;
  long fd = syscall(SYS_perf_event_open, &a, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = page_size() + s->ring_bytes;
  void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
  if (ring == MAP_FAILED) {
    int e = -errno;
    close((int)fd);
    return e;
  }
  t->tid = tid;
  t->fd = (int)fd;
  t->ring = ring;
  t->seen = 1;
  return 0;
}

static void close_event(struct v8_sampler *s, struct v8_thread_ev *t) {
  if (t->ring) munmap(t->ring, page_size() + s->ring_bytes);
  if (t->fd >= 0) close(t->fd);
  t->ring = NULL;
  t->fd = -1;
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
                    uint32_t max_threads) {
  memset(s, 0, sizeof(*s));
  s->pid = pid;
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

/* One PERF_RECORD_SAMPLE body (after the header) -> callback. */
static int parse_sample(struct v8_sampler *s, const unsigned char *p, size_t len, v8_sample_fn fn,
                        void *ctx) {
  size_t at = 0;
  uint64_t pidtid, abi;
  if (get_u64(p, len, &at, &pidtid) < 0 || get_u64(p, len, &at, &abi) < 0) return -1;
  struct v8_raw_sample rs = {.tid = (uint32_t)(pidtid >> 32)};
  if (abi == PERF_SAMPLE_REGS_ABI_NONE) return -1; /* a kernel thread: no user state */
  /* registers in ascending bit order: BP, SP, IP on both architectures */
  uint64_t r[3];
  for (int i = 0; i < 3; i++)
    if (get_u64(p, len, &at, &r[i]) < 0) return -1;
  rs.regs.bp = r[0];
  rs.regs.sp = r[1];
  rs.regs.ip = r[2];
  uint64_t size, dyn = 0;
  if (get_u64(p, len, &at, &size) < 0) return -1;
  if (size > len - at) return -1;
  const unsigned char *data = p + at;
  at += size;
  if (size && get_u64(p, len, &at, &dyn) < 0) return -1;
  if (dyn > size) dyn = size;
  rs.stack = data;
  rs.stack_len = (size_t)dyn;
  fn(ctx, &rs);
  return 0;
}

static size_t drain_one(struct v8_sampler *s, struct v8_thread_ev *t, v8_sample_fn fn, void *ctx) {
  struct perf_event_mmap_page *pg = t->ring;
  const unsigned char *data = (const unsigned char *)t->ring + page_size();
  uint64_t size = s->ring_bytes;
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
    if (h.type == PERF_RECORD_SAMPLE) {
      if (parse_sample(s, p, body, fn, ctx) == 0) n++;
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
  for (size_t i = 0; i < s->nth; i++)
    if (s->th[i].ring) n += drain_one(s, &s->th[i], fn, ctx);
  return n;
}
