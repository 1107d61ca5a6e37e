/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-task perf events, for rootless mode: an unprivileged user may not
 * open system-wide per-CPU events, but under kernel.perf_event_paranoid <= 2
 * may sample its own processes. One event is opened per (thread, CPU); the
 * first event on each CPU owns that CPU's ring and the others are redirected
 * into it (PERF_EVENT_IOC_SET_OUTPUT needs the same CPU), so the drain sees
 * the same per-CPU rings as in system-wide mode. inherit=1 makes threads and
 * processes started later by a sampled thread sampled too.
 *
 * Cost: threads x CPUs file descriptors, capped at MAX_TASK_FDS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "perf.h"
#include "polyprof/kit/proc_tree.h"

#define SCRATCH_SIZE 65536
#define MAX_TASK_FDS 8192
#define MAX_CPUS 4096

static int add_task_fd(struct perf_events *ev, int fd) {
  int *g = realloc(ev->task_fds, (ev->ntask_fds + 1) * sizeof(*g));
  if (!g) return -ENOMEM;
  ev->task_fds = g;
  ev->task_fds[ev->ntask_fds++] = fd;
  return 0;
}

/* One thread on every CPU: into the CPU's ring, mapping the ring if this is
 * its first event. 0 or -errno (err set for mmap failures). */
static int open_thread(struct perf_events *ev, struct perf_event_attr *a, uint32_t tid,
                       const int *cpus, int ncpu, int *ring_of_cpu, uint32_t pages, char *err,
                       size_t errlen) {
  for (int i = 0; i < ncpu; i++) {
    int fd = perf_sys_event_open(a, (pid_t)tid, cpus[i], -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == ENODEV) continue; /* CPU went offline */
      return -e;
    }
    if (ring_of_cpu[i] < 0) {
      if (perf_ring_map(ev, fd, cpus[i], pages, err, errlen) < 0) {
        int e = errno;
        close(fd);
        return -e;
      }
      ring_of_cpu[i] = ev->nrings - 1;
      continue;
    }
    if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ev->rings[ring_of_cpu[i]].fd) < 0 ||
        add_task_fd(ev, fd) < 0) {
      int e = errno ? errno : ENOMEM;
      close(fd);
      return -e;
    }
  }
  return 0;
}

static int open_all(struct perf_events *ev, struct perf_event_attr *a,
                    const struct perf_events_config *cfg, const int *cpus, int ncpu, char *err,
                    size_t errlen, size_t *nthreads) {
  int ring_of_cpu[MAX_CPUS];
  for (int i = 0; i < ncpu; i++)
    ring_of_cpu[i] = -1;
  uint32_t tids[1024];
  *nthreads = 0;
  for (size_t p = 0; p < cfg->npids; p++) {
    size_t n = 0;
    int rc = pp_proc_threads(cfg->pids[p], tids, sizeof(tids) / sizeof(tids[0]), &n);
    if (rc < 0) continue; /* exited: the other pids still count */
    for (size_t t = 0; t < n; t++) {
      if ((ev->ntask_fds + (size_t)ev->nrings + (size_t)ncpu) > MAX_TASK_FDS) {
        snprintf(err, errlen, "more than %d perf events for the threads of --pids: give fewer pids",
                 MAX_TASK_FDS);
        return -EMFILE;
      }
      rc = open_thread(ev, a, tids[t], cpus, ncpu, ring_of_cpu, cfg->data_pages, err, errlen);
      if (rc == -ESRCH) continue; /* the thread exited meanwhile */
      if (rc < 0) return rc;
      (*nthreads)++;
    }
  }
  return 0;
}

int perf_events_open_tasks(struct perf_events *ev, const struct perf_events_config *cfg, char *err,
                           size_t errlen) {
  struct perf_event_attr a;
  int rc = perf_events_attr(ev, cfg, &a, err, errlen);
  if (rc < 0) return rc;
  a.inherit = 1;
  int cpus[MAX_CPUS];
  int ncpu = perf_online_cpus(cpus, MAX_CPUS);
  rc = perf_events_alloc(ev, ncpu, err, errlen);
  if (rc < 0) return rc;
  ev->per_task = true;
  err[0] = '\0';
  size_t nthreads = 0;
  rc = open_all(ev, &a, cfg, cpus, ncpu, err, errlen, &nthreads);
  if ((rc == -EACCES || rc == -EPERM) && !a.exclude_kernel) {
    /* kernel.perf_event_paranoid=2: user space only for the unprivileged */
    perf_events_close(ev);
    perf_events_attr(ev, cfg, &a, err, errlen);
    a.inherit = 1;
    a.exclude_kernel = 1;
    a.exclude_callchain_kernel = 1;
    rc = perf_events_alloc(ev, ncpu, err, errlen);
    if (rc < 0) return rc;
    ev->per_task = true;
    ev->kernel_refused = true;
    rc = open_all(ev, &a, cfg, cpus, ncpu, err, errlen, &nthreads);
  }
  if (rc == 0 && nthreads == 0) rc = -ESRCH;
  if (rc < 0) {
    if (rc == -ESRCH)
      snprintf(err, errlen, "none of the --pids has a thread left to sample");
    else if (!err[0])
      perf_events_explain(-rc, cfg, ev->event_name, err, errlen);
    perf_events_close(ev);
    return rc;
  }
  return 0;
}
