/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes perf keeps samples of when it is given pids: those, and
 * with perf.follow_children (`polyprof run`, `attach --subprocesses`) every
 * process they start, however deep: `run -- timeout 5 prog` asks for prog,
 * a grandchild started before perf looked or any time after.
 *
 * The descendants that exist when sampling starts come from /proc (read
 * both before the events are opened, so that per-task events cover them,
 * and after, so that none forked in between is missed); later ones from
 * the FORK records of the ring buffers, which arrive in time order before
 * any sample of the child. A followed process leaves the set with its
 * EXIT record, so that its pid, once reused, is not sampled; the pids
 * given stay. The set is sorted (one binary search per sample) and bounded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "polyprof/kit/proc_tree.h"

/* processes followed at once beyond the ones given */
#define MAX_FOLLOWED 8192

static bool in_sorted(const uint32_t *v, size_t n, uint32_t pid, size_t *at) {
  /* the first element not below pid: halve the range that may hold it */
  size_t lo = 0, len = n;
  while (len) {
    size_t half = len / 2;
    if (v[lo + half] < pid) {
      lo += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  *at = lo;
  return lo < n && v[lo] == pid;
}

static int by_value(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return a < b ? -1 : a > b;
}

bool perf_pid_wanted(const struct perf_state *st, uint32_t pid) {
  size_t at;
  return !st->npids || in_sorted(st->pids, st->npids, pid, &at);
}

int perf_follow_init(struct perf_state *st, bool follow_children) {
  st->follow_children = follow_children && st->npids;
  if (!st->npids) return 0;
  qsort(st->pids, st->npids, sizeof(*st->pids), by_value);
  size_t n = 0;
  for (size_t i = 0; i < st->npids; i++)
    if (!n || st->pids[n - 1] != st->pids[i]) st->pids[n++] = st->pids[i];
  st->npids = n;
  st->pids_cap = n;
  st->pids_given = malloc(n * sizeof(*st->pids_given));
  if (!st->pids_given) return -ENOMEM;
  memcpy(st->pids_given, st->pids, n * sizeof(*st->pids_given));
  st->npids_given = n;
  return 0;
}

static void add(struct perf_state *st, uint32_t pid) {
  size_t at;
  if (in_sorted(st->pids, st->npids, pid, &at)) return;
  if (st->npids >= st->npids_given + MAX_FOLLOWED) {
    if (!st->follow_full_logged)
      PP_WARNING(st->host,
                 "more than %d subprocesses at once: the ones started from now on are not "
                 "followed",
                 MAX_FOLLOWED);
    st->follow_full_logged = true;
    return;
  }
  if (st->npids == st->pids_cap) {
    size_t cap = st->pids_cap * 2 + 16;
    uint32_t *g = realloc(st->pids, cap * sizeof(*g));
    if (!g) return;
    st->pids = g;
    st->pids_cap = cap;
  }
  memmove(st->pids + at + 1, st->pids + at, (st->npids - at) * sizeof(*st->pids));
  st->pids[at] = pid;
  st->npids++;
}

void perf_follow_scan(struct perf_state *st) {
  if (!st->follow_children) return;
  uint32_t found[1024];
  for (size_t i = 0; i < st->npids_given; i++) {
    size_t n = pp_proc_descendants(st->pids_given[i], found, sizeof(found) / sizeof(found[0]));
    for (size_t k = 0; k < n; k++)
      add(st, found[k]);
  }
}

void perf_follow_fork(struct perf_state *st, uint32_t pid, uint32_t ppid) {
  /* a new thread's FORK record names its own process as the parent */
  if (st->follow_children && pid != ppid && perf_pid_wanted(st, ppid)) add(st, pid);
}

void perf_follow_exit(struct perf_state *st, uint32_t pid, uint32_t tid) {
  size_t at;
  if (!st->follow_children || pid != tid || in_sorted(st->pids_given, st->npids_given, pid, &at))
    return;
  if (!in_sorted(st->pids, st->npids, pid, &at)) return;
  memmove(st->pids + at, st->pids + at + 1, (st->npids - at - 1) * sizeof(*st->pids));
  st->npids--;
}
