/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CPU-time alarm per Ruby thread: a perf "task-clock" software event on
 * the thread's tid that overflows every `period_ns` of CPU the thread uses
 * and wakes our epoll. It is ITIMER_PROF (what stackprof samples with)
 * armed from outside the process: the kernel counts, nothing runs while the
 * thread is off CPU, and the count of overflows is the sample's weight. So
 * the sampler's cost follows the CPU the targets burn, not wall time, and a
 * thread that waits in a run queue is not counted as running.
 *
 * Each event has the smallest ring buffer perf allows (one metadata page,
 * one data page): overflows write 8-byte header-only records there, and
 * poll/epoll needs a buffer to report them. A record holds nothing from the
 * target; the ring is still parsed with bounds (the header sizes are the
 * kernel's, but a bug must not turn into a loop or an overrun).
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ruby.h"

static size_t page_size(void) {
  static size_t ps;
  if (!ps) {
    long v = sysconf(_SC_PAGESIZE);
    ps = v > 0 ? (size_t)v : 4096;
  }
  return ps;
}

static int open_task_clock(uint32_t tid, uint64_t period_ns) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = period_ns;
  a.sample_type = 0; /* the record's existence is the information */
  a.wakeup_events = 1;
  long fd = syscall(SYS_perf_event_open, &a, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : (int)fd;
}

int ruby_cpuclock_probe(uint64_t period_ns) {
  struct ruby_thread th = {.pfd = -1};
  int rc = ruby_cpuclock_open(&th, (uint32_t)syscall(SYS_gettid), period_ns, -1, 0);
  ruby_cpuclock_close(&th);
  return rc;
}

int ruby_cpuclock_open(struct ruby_thread *th, uint32_t tid, uint64_t period_ns, int epfd,
                       uint64_t key) {
  int fd = open_task_clock(tid, period_ns);
  if (fd < 0) return fd;
  size_t ps = page_size();
  void *ring = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (ring == MAP_FAILED) {
    int e = -errno;
    close(fd);
    return e;
  }
  if (epfd >= 0) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = key};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
      int e = -errno;
      munmap(ring, 2 * ps);
      close(fd);
      return e;
    }
  }
  th->pfd = fd;
  th->ring = ring;
  return 0;
}

void ruby_cpuclock_close(struct ruby_thread *th) {
  if (th->pfd < 0) return;
  /* No EPOLL_CTL_DEL: the fd is never duplicated, so once the ring (which
   * holds the file too) is unmapped, close() drops the last reference and
   * the kernel takes it out of the epoll set: a system call less for every
   * thread and process that ends. */
  if (th->ring) munmap(th->ring, 2 * page_size());
  close(th->pfd);
  th->pfd = -1;
  th->ring = NULL;
}

uint64_t ruby_cpuclock_drain(struct ruby_thread *th) {
  if (!th->ring) return 0;
  struct perf_event_mmap_page *pg = th->ring;
  const unsigned char *data = (const unsigned char *)th->ring + page_size();
  uint64_t size = page_size(); /* one data page, whatever pg->data_size says */
  uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = pg->data_tail;
  uint64_t overflows = 0;
  /* more than a ring's worth unread cannot happen (the kernel stops
   * writing): treat it as a bug and only count what fits */
  if (head - tail > size) tail = head - size;
  while (head - tail >= sizeof(struct perf_event_header)) {
    struct perf_event_header h;
    memcpy(&h, data + (tail % size), sizeof(h)); /* 8-aligned: never wraps */
    if (h.size < sizeof(h) || h.size > head - tail || (h.size & 7)) break;
    if (h.type == PERF_RECORD_SAMPLE) {
      overflows++;
    } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
      uint64_t lost; /* {u64 id; u64 lost}: may wrap around the ring end */
      uint64_t at = tail + sizeof(h) + 8;
      unsigned char b[8];
      for (int i = 0; i < 8; i++)
        b[i] = data[(at + (uint64_t)i) % size];
      memcpy(&lost, b, sizeof(lost));
      if (lost < (1u << 20)) overflows += lost;
    }
    tail += h.size;
  }
  __atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
  return overflows;
}
