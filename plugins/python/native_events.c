/* SPDX-License-Identifier: Apache-2.0 */
/*
 * python.native: a perf cpu-clock event on each thread of a target, each
 * sample carrying the user registers and a copy of the top of the user
 * stack (what the unwinder needs, nothing live). One ring per thread: the
 * kernel refuses PERF_EVENT_IOC_SET_OUTPUT between per-thread events of
 * different threads (an output ring that is not per-CPU must belong to the
 * same task), and per-CPU events per thread would cost CPUs x threads
 * descriptors. The ring is read from the plugin's tick; every length in a
 * record is checked against the record and the ring.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "native.h"

#define PAGE 4096u

int pyn_thread_open(struct pyn_thread *t, uint32_t tid, uint64_t period_ns) {
  memset(t, 0, sizeof(*t));
  t->fd = -1;
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.sample_period = period_ns;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN |
                  PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  /* the callchain gives the kernel frames only; user frames come from the
   * stack copy */
  a.exclude_callchain_user = 1;
  a.sample_max_stack = PYN_MAX_KERNEL;
  a.sample_regs_user = pp_unwind_regs_mask();
  a.sample_stack_user = PYN_STACK_COPY;
  /* sample times on the clock the plugin reads, to tell a sample read
   * too late (the worker was descheduled) */
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.exclude_hv = 1;
  a.exclude_idle = 1;
  /* in a system call the sample still carries the user registers and
   * stack, so CPU time spent in the kernel is counted under its caller */
  long fd = syscall(SYS_perf_event_open, &a, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = (1 + PYN_RING_PAGES) * PAGE;
  void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
  if (ring == MAP_FAILED) {
    int err = errno;
    close((int)fd);
    return -err;
  }
  t->tid = tid;
  t->fd = (int)fd;
  t->ring = ring;
  return 0;
}

void pyn_thread_close(struct pyn_thread *t) {
  if (t->ring) munmap(t->ring, (1 + PYN_RING_PAGES) * PAGE);
  if (t->fd >= 0) close(t->fd);
  t->ring = NULL;
  t->fd = -1;
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Parses one PERF_RECORD_SAMPLE body of len bytes. */
static bool parse_sample(const uint8_t *b, size_t len, struct pyn_sample *s) {
  size_t off = 0;
  memset(s, 0, sizeof(*s));
  if (len < 16) return false;
  uint32_t ids[2];
  memcpy(ids, b, 8);
  s->pid = ids[0], s->tid = ids[1];
  s->time = rd64(b + 8);
  off = 16;
  if (len - off < 8) return false;
  uint64_t nr = rd64(b + off);
  off += 8;
  if (nr > (len - off) / 8) return false;
  for (uint64_t i = 0; i < nr && s->nkips < PYN_MAX_KERNEL; i++) {
    uint64_t ip = rd64(b + off + 8 * i);
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) continue; /* a context marker */
    s->kips[s->nkips++] = ip;
  }
  off += 8 * (size_t)nr;
  if (len - off < 8) return false;
  uint64_t abi = rd64(b + off);
  off += 8;
  if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
    unsigned n = (unsigned)__builtin_popcountll(pp_unwind_regs_mask());
    if ((len - off) / 8 < n) return false;
    uint64_t packed[64];
    for (unsigned i = 0; i < n; i++)
      packed[i] = rd64(b + off + 8 * i);
    off += 8 * (size_t)n;
    pp_unwind_regs_unpack(pp_unwind_regs_mask(), packed, n, s->regs);
    s->have_regs = true;
  }
  if (len - off < 8) return false;
  uint64_t size = rd64(b + off);
  off += 8;
  if (size) {
    if (size > len - off || len - off - size < 8) return false;
    uint64_t dyn = rd64(b + off + size);
    s->stack = b + off;
    s->stack_len = dyn < size ? dyn : size;
  }
  return true;
}

uint64_t pyn_thread_drain(struct pyn_thread *t, uint8_t *scratch, size_t scratch_len,
                          pyn_sample_fn fn, void *ctx, uint64_t *bad) {
  if (!t->ring) return 0;
  struct perf_event_mmap_page *pg = (struct perf_event_mmap_page *)t->ring;
  const uint8_t *data = t->ring + PAGE;
  const uint64_t size = (uint64_t)PYN_RING_PAGES * PAGE;
  uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = pg->data_tail;
  uint64_t lost = 0;
  if (head - tail > size) tail = head - size; /* cannot happen unless the page lies */
  while (tail + sizeof(struct perf_event_header) <= head) {
    struct perf_event_header h;
    for (size_t i = 0; i < sizeof(h); i++)
      ((uint8_t *)&h)[i] = data[(tail + i) % size];
    if (h.size < sizeof(h) || h.size > head - tail || h.size > scratch_len) {
      (*bad)++;
      tail = head; /* the ring cannot be trusted past this point */
      break;
    }
    uint64_t at = tail % size;
    if (at + h.size <= size) {
      memcpy(scratch, data + at, h.size);
    } else {
      size_t first = (size_t)(size - at);
      memcpy(scratch, data + at, first);
      memcpy(scratch + first, data, h.size - first);
    }
    const uint8_t *body = scratch + sizeof(h);
    size_t blen = h.size - sizeof(h);
    if (h.type == PERF_RECORD_SAMPLE) {
      struct pyn_sample s;
      if (parse_sample(body, blen, &s))
        fn(ctx, &s);
      else
        (*bad)++;
    } else if (h.type == PERF_RECORD_LOST && blen >= 16) {
      lost += rd64(body + 8);
    }
    tail += h.size;
  }
  __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
  return lost;
}
