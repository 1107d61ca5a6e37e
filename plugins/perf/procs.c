/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Processes, threads and their executable mappings.
 *
 * Processes that exist when sampling starts are learnt lazily from
 * /proc/PID/maps at their first sample. Everything after that comes from
 * the ring buffer, in time order: FORK copies the parent's mappings, COMM
 * with the exec flag clears them, MMAP2 adds one (late dlopen, JIT), EXIT
 * marks the process gone. Samples are symbolized within one tick of being
 * taken, so a process that exits keeps its samples; its entry is freed a
 * tick later, when no sample of it can still be in flight.
 *
 * Only executable mappings are kept: that is all symbolization and
 * unwinding look up, and a fraction of a big process's maps.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/proc.h"

void perf_procs_init(struct perf_procs *t, size_t max_procs, size_t max_maps) {
  memset(t, 0, sizeof(*t));
  t->max_procs = max_procs;
  t->max_maps = max_maps;
}

static void proc_clear_maps(struct perf_state *st, struct perf_proc *p) {
  for (size_t i = 0; i < p->nmaps; i++)
    perf_dso_put(&st->dsos, p->maps[i].dso);
  p->nmaps = 0;
}

static void proc_free(struct perf_state *st, struct perf_proc *p) {
  proc_clear_maps(st, p);
  free(p->maps);
  pp_perfmap_free(p->jit);
  pp_jitdump_free(p->jitdump);
  free(p);
}

void perf_procs_fini(struct perf_state *st) {
  struct perf_procs *t = &st->procs;
  for (size_t i = 0; i < t->procs.cap; i++)
    if (t->procs.slots[i].val) proc_free(st, t->procs.slots[i].val);
  for (size_t i = 0; i < t->threads.cap; i++)
    free(t->threads.slots[i].val);
  perf_idmap_free(&t->procs);
  perf_idmap_free(&t->threads);
}

struct perf_proc *perf_proc_get(struct perf_state *st, uint32_t pid, bool create) {
  struct perf_proc *p = perf_idmap_get(&st->procs.procs, pid);
  if (p || !create) return p;
  if (st->procs.procs.n >= st->procs.max_procs) perf_procs_reap(st, false);
  p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->pid = pid;
  p->last_used = st->tick;
  if (perf_idmap_put(&st->procs.procs, pid, p) < 0) {
    free(p);
    return NULL;
  }
  return p;
}

/* Inserts a mapping, cutting away whatever it overlaps (a new mmap over an
 * old range replaces it, as in the kernel). */
static int proc_insert_map(struct perf_state *st, struct perf_proc *p, uint64_t start, uint64_t end,
                           uint64_t pgoff, struct perf_dso *dso) {
  size_t i = 0;
  while (i < p->nmaps) {
    struct perf_map *m = &p->maps[i];
    if (m->end <= start || m->start >= end) {
      i++;
      continue;
    }
    if (m->start < start && m->end > end) {
      /* the new map splits m in two: keep the tail as its own entry */
      if (p->nmaps == p->cap) break; /* rare; fall back to truncation below */
      memmove(&p->maps[i + 1], &p->maps[i], (p->nmaps - i) * sizeof(*m));
      p->nmaps++;
      struct perf_map *tail = &p->maps[i + 1];
      tail->pgoff += end - tail->start;
      tail->start = end;
      tail->bias_ok = 0;
      if (tail->dso) tail->dso->refs++;
      m->end = start;
      i += 2;
      continue;
    }
    if (m->start < start) {
      m->end = start;
      i++;
    } else if (m->end > end) {
      m->pgoff += end - m->start;
      m->start = end;
      m->bias_ok = 0;
      i++;
    } else {
      perf_dso_put(&st->dsos, m->dso);
      memmove(m, m + 1, (p->nmaps - i - 1) * sizeof(*m));
      p->nmaps--;
    }
  }
  if (st->procs.max_maps && p->nmaps >= st->procs.max_maps) {
    perf_dso_put(&st->dsos, dso);
    return -ENOSPC;
  }
  if (p->nmaps == p->cap) {
    size_t ncap = p->cap ? p->cap * 2 : 16;
    struct perf_map *g = realloc(p->maps, ncap * sizeof(*g));
    if (!g) {
      perf_dso_put(&st->dsos, dso);
      return -ENOMEM;
    }
    p->maps = g;
    p->cap = ncap;
  }
  size_t at = 0;
  while (at < p->nmaps && p->maps[at].start < start)
    at++;
  memmove(&p->maps[at + 1], &p->maps[at], (p->nmaps - at) * sizeof(*p->maps));
  p->maps[at] = (struct perf_map){.start = start, .end = end, .pgoff = pgoff, .dso = dso};
  p->nmaps++;
  return 0;
}

int perf_proc_need_maps(struct perf_state *st, struct perf_proc *p) {
  if (p->maps_state != 0) return p->maps_state < 0 ? p->maps_state : 0;
  if (p->pid == 0) { /* the idle task: kernel only */
    p->maps_state = 1;
    return 0;
  }
  struct pp_map *maps = NULL;
  size_t n = 0;
  int rc = pp_maps_read(p->pid, 1, st->procs.max_maps, &maps, &n);
  if (rc < 0) {
    st->procs.maps_errors++;
    p->maps_state = rc;
    return rc;
  }
  for (size_t i = 0; i < n; i++) {
    struct perf_dso *dso = NULL;
    /* as for MMAP2 records: memfd code (.NET's double-mapped JIT) is JIT */
    if (maps[i].path && strncmp(maps[i].path, "/memfd:", 7) != 0) {
      dso = perf_dso_get(&st->dsos, maps[i].dev_major, maps[i].dev_minor, maps[i].inode,
                         maps[i].path);
      if (!dso) continue;
    }
    proc_insert_map(st, p, maps[i].start, maps[i].end, maps[i].offset, dso);
  }
  pp_maps_free(maps, n);
  if (!p->comm[0]) pp_proc_comm(p->pid, p->comm, sizeof(p->comm));
  if (!p->ns_pid) pp_proc_ns_pid(p->pid, &p->ns_pid);
  p->maps_state = 1;
  return 0;
}

struct perf_map *perf_proc_find_map(struct perf_proc *p, uint64_t addr) {
  size_t lo = 0, hi = p->nmaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->maps[mid].end <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < p->nmaps && p->maps[lo].start <= addr) return &p->maps[lo];
  return NULL;
}

static struct perf_thread *thread_get(struct perf_state *st, uint32_t pid, uint32_t tid,
                                      bool create) {
  struct perf_thread *t = perf_idmap_get(&st->procs.threads, tid);
  if (t && t->pid != pid) { /* tid reused by another process */
    t->pid = pid;
    t->comm[0] = '\0';
  }
  if (t || !create) return t;
  /* bounded: live threads plus a margin; idle entries are reaped */
  if (st->procs.threads.n >= st->procs.max_procs * 16) return NULL;
  t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->tid = tid;
  t->pid = pid;
  if (perf_idmap_put(&st->procs.threads, tid, t) < 0) {
    free(t);
    return NULL;
  }
  return t;
}

const char *perf_thread_comm(struct perf_state *st, uint32_t pid, uint32_t tid) {
  if (tid == 0) return "swapper";
  struct perf_thread *t = thread_get(st, pid, tid, true);
  if (!t) {
    struct perf_proc *p = perf_proc_get(st, pid, false);
    return p && p->comm[0] ? p->comm : "";
  }
  if (!t->comm[0]) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
    size_t n = 0;
    if (pp_read_file(path, t->comm, sizeof(t->comm), &n) == 0) {
      while (n > 0 && t->comm[n - 1] == '\n')
        t->comm[--n] = '\0';
    }
    if (!t->comm[0]) {
      /* gone already and never named by a FORK or COMM record (perf would
       * print ":<tid>"): the process's name if known, else "" and the host
       * names the stack after the process it remembers. Not cached: a COMM
       * record drained later from another CPU's ring still names it. */
      struct perf_proc *p = perf_proc_get(st, pid, false);
      return p && p->comm[0] ? p->comm : "";
    }
  }
  return t->comm;
}

void perf_proc_on_comm(struct perf_state *st, uint32_t pid, uint32_t tid, const char *comm,
                       bool exec) {
  struct perf_thread *t = thread_get(st, pid, tid, true);
  if (t) snprintf(t->comm, sizeof(t->comm), "%s", comm);
  struct perf_proc *p = perf_proc_get(st, pid, exec);
  if (!p) return;
  if (pid == tid) snprintf(p->comm, sizeof(p->comm), "%s", comm);
  if (exec) {
    /* a new image: the old mappings are gone; the new ones follow as MMAP2 */
    proc_clear_maps(st, p);
    pp_perfmap_free(p->jit);
    p->jit = NULL;
    p->jit_missing = false;
    pp_jitdump_free(p->jitdump);
    p->jitdump = NULL;
    p->go_version[0] = '\0';
    p->maps_state = 1;
  }
}

void perf_proc_on_mmap2(struct perf_state *st, uint32_t pid, uint64_t start, uint64_t len,
                        uint64_t pgoff, uint32_t maj, uint32_t min, uint64_t ino, uint32_t prot,
                        const char *path) {
  if (!(prot & 4 /* PROT_EXEC */)) return;
  struct perf_proc *p = perf_proc_get(st, pid, false);
  /* an unknown process is read from /proc at its first sample, which will
   * include this mapping */
  if (!p || p->maps_state != 1) return;
  if (start + len < start) return;
  struct perf_dso *dso = NULL;
  if (path && path[0] && strcmp(path, "//anon") != 0 && strncmp(path, "/memfd:", 7) != 0 &&
      strcmp(path, "[anon]") != 0) {
    dso = perf_dso_get(&st->dsos, maj, min, ino, path);
    if (!dso) return;
  }
  proc_insert_map(st, p, start, start + len, pgoff, dso);
}

void perf_proc_on_fork(struct perf_state *st, uint32_t pid, uint32_t ppid, uint32_t tid,
                       uint32_t ptid) {
  /* the creating thread's name is what the new thread or process inherits */
  char pcomm[PERF_COMM_LEN] = "";
  struct perf_thread *pt = perf_idmap_get(&st->procs.threads, ptid);
  if (pt && pt->pid == ppid && pt->comm[0]) {
    memcpy(pcomm, pt->comm, sizeof(pcomm));
  } else {
    char path[64];
    size_t n = 0;
    snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", ppid, ptid);
    if (pp_read_file(path, pcomm, sizeof(pcomm), &n) == 0)
      while (n > 0 && pcomm[n - 1] == '\n')
        pcomm[--n] = '\0';
  }
  if (pid != tid) { /* a new thread */
    struct perf_thread *t = thread_get(st, pid, tid, true);
    if (t && pcomm[0]) memcpy(t->comm, pcomm, sizeof(t->comm));
    return;
  }
  /* A new process: a copy of the parent's address space. The parent is
   * alive now (it just forked), so an untracked one is read from /proc
   * here; the child may be gone before its samples are drained. */
  struct perf_proc *parent = ppid ? perf_proc_get(st, ppid, true) : NULL;
  if (parent && parent->maps_state == 0) perf_proc_need_maps(st, parent);
  struct perf_proc *p = perf_proc_get(st, pid, false);
  if (p) { /* pid reuse: forget the previous owner */
    perf_idmap_del(&st->procs.procs, pid);
    proc_free(st, p);
  }
  p = perf_proc_get(st, pid, true);
  if (!p) return;
  if (parent && parent->maps_state == 1) {
    for (size_t i = 0; i < parent->nmaps; i++) {
      struct perf_map *m = &parent->maps[i];
      if (m->dso) m->dso->refs++;
      if (proc_insert_map(st, p, m->start, m->end, m->pgoff, m->dso) < 0) break;
    }
    memcpy(p->comm, parent->comm, sizeof(p->comm));
    memcpy(p->go_version, parent->go_version, sizeof(p->go_version));
    p->ns_pid = 0;
    p->maps_state = 1;
  }
  if (pcomm[0]) memcpy(p->comm, pcomm, sizeof(p->comm));
  struct perf_thread *t = thread_get(st, pid, tid, true);
  if (t && pcomm[0]) memcpy(t->comm, pcomm, sizeof(t->comm));
}

void perf_proc_on_exit(struct perf_state *st, uint32_t pid, uint32_t tid) {
  struct perf_thread *t = perf_idmap_del(&st->procs.threads, tid);
  free(t);
  if (pid != tid) return;
  struct perf_proc *p = perf_proc_get(st, pid, false);
  if (p && !p->exited) {
    p->exited = true;
    p->exit_tick = st->tick;
  }
}

void perf_procs_reap(struct perf_state *st, bool session_end) {
  struct perf_procs *t = &st->procs;
  bool over = t->procs.n >= t->max_procs;
  for (size_t i = 0; i < t->procs.cap;) {
    struct perf_proc *p = t->procs.slots[i].val;
    bool drop = false;
    if (p) {
      /* an exited process stays one full tick: samples taken just before
       * its exit may sit in another CPU's ring */
      if (p->exited && st->tick > p->exit_tick + 1 && !p->sampled) drop = true;
      if (p->exited && session_end && st->tick > p->exit_tick + 1) drop = true;
      /* idle processes cost memory; they are re-read from /proc if they
       * wake up */
      if (!p->exited && (over || session_end) && !p->sampled && st->tick > p->last_used + 600)
        drop = true;
    }
    if (drop) {
      perf_idmap_del(&t->procs, p->pid); /* shifts a later slot into i */
      proc_free(st, p);
      continue;
    }
    i++;
  }
  if (session_end) {
    /* threads of processes we no longer track */
    for (size_t i = 0; i < t->threads.cap;) {
      struct perf_thread *th = t->threads.slots[i].val;
      if (th && !perf_idmap_get(&t->procs, th->pid)) {
        perf_idmap_del(&t->threads, th->tid);
        free(th);
        continue;
      }
      i++;
    }
    perf_dsos_collect(&st->dsos);
  }
}
