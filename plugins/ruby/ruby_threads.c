/*
 * Ruby threads of a process and whether each is on a CPU.
 *
 * gProfiler runs rbspy with --oncpu: a sample is taken only when the thread
 * runs. rbspy only ever looks at the thread holding the GVL; we walk the
 * thread list of the main ractor (3.x) or the VM (2.x), map each Ruby thread
 * to its OS thread through the tid Ruby records (3.1+) or, before 3.1,
 * through its pthread_t into libc's struct pthread, and sample every Ruby
 * thread whose OS thread is in state R -- including threads running C code
 * with the GVL released. When a version's table lacks the list, or the
 * tids do not check out, we fall back to rbspy's behaviour: the GVL
 * holder, when any thread of the process runs.
 *
 * "On a CPU" is read from /proc/PID/task/TID/schedstat: the thread's run
 * time advanced since the previous tick. That is stricter than rbspy's state
 * R, which also holds for a thread waiting in a run queue, and on a loaded
 * machine counted one preempted position many times. The thread must also
 * be in state R at the tick: its stack is read now, and a thread that ran
 * and then slept would be sampled in its sleep. Without schedstats the
 * state letter of .../stat is used alone. The files are kept open and
 * re-read with pread(): one system call per thread per tick (two for a
 * thread that ran) instead of three.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ruby.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"

#define MAX_TASKS_SCANNED 4096

static bool heap_ptr(uint64_t a) {
  return a >= 4096 && a < (1ull << 47) && (a & 7) == 0;
}

/* State letter out of a stat line: the comm may hold ')' and spaces, so
 * look after the last ')'. */
static char state_of(const char *stat) {
  const char *p = strrchr(stat, ')');
  return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

bool ruby_any_task_running(uint32_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", pid);
  DIR *d = opendir(path);
  if (!d) return false;
  bool running = false;
  struct dirent *de;
  int n = 0;
  while (!running && (de = readdir(d)) && n++ < MAX_TASKS_SCANNED) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    char p[96], buf[512];
    snprintf(p, sizeof(p), "/proc/%u/task/%.20s/stat", pid, de->d_name);
    if (pp_read_file(p, buf, sizeof(buf), NULL) == 0 && state_of(buf) == 'R') running = true;
  }
  closedir(d);
  return running;
}

/* Host tid of a thread known by its tid inside the process's namespace:
 * the last NSpid field of each task's status names it there. */
static uint32_t host_tid_of(uint32_t pid, uint32_t ns_tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  uint32_t found = 0;
  struct dirent *de;
  int n = 0;
  while (!found && (de = readdir(d)) && n++ < MAX_TASKS_SCANNED) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    char p[96], buf[2048];
    snprintf(p, sizeof(p), "/proc/%u/task/%.20s/status", pid, de->d_name);
    if (pp_read_file(p, buf, sizeof(buf), NULL) < 0) continue;
    const char *l = strstr(buf, "\nNSpid:");
    if (!l) continue;
    l += 7;
    const char *eol = strchr(l, '\n');
    const char *last = l;
    for (const char *q = l; *q && (!eol || q < eol); q++)
      if ((*q == ' ' || *q == '\t') && q[1] >= '0' && q[1] <= '9') last = q + 1;
    if ((uint32_t)strtoul(last, NULL, 10) == ns_tid)
      found = (uint32_t)strtoul(de->d_name, NULL, 10);
  }
  closedir(d);
  return found;
}

static bool via_pthread(const struct ruby_state *st, const struct ruby_target *t) {
  return t->L->thread_pthread >= 0 && (t->L->thread_tid < 0 || st->tids_from_pthread);
}

bool ruby_tids_known(const struct ruby_state *st, const struct ruby_target *t) {
  return via_pthread(st, t) ? t->pthread_tid_off >= 0 : t->L->thread_tid >= 0;
}

/* glibc's struct pthread on x86_64 (tcbhead_t, then a list_t, then tid):
 * 720 in every glibc since 2.12 (checked on 2.36 here). Preferred when it
 * holds the pid; other libcs (musl) are found by the scan. */
#define GLIBC_PTHREAD_TID 720
#define PTHREAD_SCAN_BYTES 1600

void ruby_find_pthread_tid(struct ruby_state *st, struct ruby_target *t) {
  const struct ruby_layout *L = t->L;
  t->pthread_tid_off = -1;
  if (!via_pthread(st, t)) return;
  int16_t at = L->vm_ractor_main_thread >= 0 ? L->vm_ractor_main_thread : L->vm_main_thread;
  uint64_t main_th = 0, pt = 0;
  if (at < 0 || pp_remote_read((pid_t)t->pid, t->vm + (uint64_t)at, &main_th, 8) < 0 ||
      !heap_ptr(main_th) ||
      pp_remote_read((pid_t)t->pid, main_th + (uint64_t)L->thread_pthread, &pt, 8) < 0 ||
      !heap_ptr(pt))
    return;
  /* The main thread's tid is the (namespace) pid: the word holding it is
   * the tid field (austin's and our python plugin's method). The upper
   * half of a pointer (0x7fxx) can equal a small pid: skip those. */
  int32_t block[PTHREAD_SCAN_BYTES / 4];
  if (pp_remote_read((pid_t)t->pid, pt, block, sizeof(block)) < 0) return;
  if (block[GLIBC_PTHREAD_TID / 4] == (int32_t)t->ns_pid) {
    t->pthread_tid_off = GLIBC_PTHREAD_TID;
    return;
  }
  for (int i = 1; i < PTHREAD_SCAN_BYTES / 4; i++) {
    if (block[i] != (int32_t)t->ns_pid) continue;
    uint64_t word =
        (uint64_t)(uint32_t)block[i - (i & 1)] | ((uint64_t)(uint32_t)block[i - (i & 1) + 1] << 32);
    if ((i & 1) && heap_ptr(word)) continue;
    t->pthread_tid_off = i * 4;
    return;
  }
}

static int read_tid(const struct ruby_state *st, const struct ruby_target *t, uint64_t th,
                    uint32_t *tid) {
  const struct ruby_layout *L = t->L;
  uint64_t base = th;
  if (via_pthread(st, t)) {
    /* pthread_t -> struct pthread -> tid; a tid that is not a task of the
     * process (a torn read, a wrong offset) is refused */
    uint64_t pt = 0;
    int32_t v = 0;
    if (t->pthread_tid_off < 0) return -ENOTSUP;
    int rc = pp_remote_read((pid_t)t->pid, th + (uint64_t)L->thread_pthread, &pt, sizeof(pt));
    if (rc < 0) return rc;
    if (!heap_ptr(pt)) return -EINVAL;
    rc = pp_remote_read((pid_t)t->pid, pt + (uint64_t)t->pthread_tid_off, &v, sizeof(v));
    if (rc < 0) return rc;
    if (v <= 0 || v > (1 << 22)) return -EINVAL;
    if (t->ns_pid == t->pid && (uint32_t)v != t->pid) {
      char path[64];
      snprintf(path, sizeof(path), "/proc/%u/task/%d", t->pid, v);
      if (access(path, F_OK) != 0) return -EINVAL;
    }
    *tid = (uint32_t)v;
    return 0;
  }
  if (L->thread_tid < 0) return -ENOTSUP;
  if (L->thread_nt >= 0) {
    int rc = pp_remote_read((pid_t)t->pid, th + L->thread_nt, &base, sizeof(base));
    if (rc < 0) return rc;
    if (!heap_ptr(base)) return -EINVAL;
  }
  int32_t v = 0;
  int rc = pp_remote_read((pid_t)t->pid, base + L->thread_tid, &v, sizeof(v));
  if (rc < 0) return rc;
  if (v <= 0 || v > (1 << 22)) return -EINVAL; /* pid_max bound */
  *tid = (uint32_t)v;
  return 0;
}

static void thread_close(struct ruby_state *st, struct ruby_thread *th) {
  if (th->fd >= 0) close(th->fd);
  if (th->stat_fd >= 0) close(th->stat_fd);
  th->fd = th->stat_fd = -1;
  ruby_cpuclock_close(th);
}

void ruby_threads_close(struct ruby_state *st, struct ruby_target *t) {
  for (uint32_t i = 0; i < t->nthreads; i++)
    thread_close(st, &t->threads[i]);
  t->nthreads = 0;
  t->cpuclock = false;
}

int ruby_threads_refresh(struct ruby_state *st, struct ruby_target *t) {
  const struct ruby_layout *L = t->L;
  t->threads_at_ns = st->now_ns;
  uint64_t head;
  if (L->ractor_threads_set >= 0 && t->main_ractor)
    head = t->main_ractor + L->ractor_threads_set;
  else if (L->vm_living_threads >= 0)
    head = t->vm + L->vm_living_threads;
  else
    head = 0;

  bool ok = head && ruby_tids_known(st, t);
  /* ccan list head {first, last}: with one or two threads, the same first
   * and last nodes as the list we hold mean the same list (threads are
   * appended at the tail; one that ends hangs up its alarm, which forces a
   * full read). One read instead of a walk: busy targets re-check their
   * list every second. */
  uint64_t ends[2] = {0, 0};
  if (ok && pp_remote_read((pid_t)t->pid, head, ends, sizeof(ends)) < 0) ok = false;
  if (ok && t->per_thread && !t->threads_changed && t->nthreads > 0 && t->nthreads <= 2 &&
      ends[0] == t->threads[0].addr && ends[1] == t->threads[t->nthreads - 1].addr)
    return 0;

  struct ruby_thread fresh[RUBY_MAX_THREADS_HARD];
  uint32_t n = 0;
  bool saw_main = false;
  if (ok) {
    /* ccan list: the node is at offset 0 of rb_thread_t; stop at the head,
     * at the bound, or at anything that does not look like a pointer (a
     * torn list or a cycle not through the head ends at the bound) */
    uint64_t node = ends[0];
    while (ok && node != head && n < (uint32_t)st->max_threads) {
      if (!heap_ptr(node)) {
        ok = false;
        break;
      }
      uint32_t tid = 0;
      if (read_tid(st, t, node, &tid) == 0) {
        if (tid == t->ns_pid) saw_main = true;
        if (t->ns_pid != t->pid) tid = host_tid_of(t->pid, tid);
      }
      fresh[n++] =
          (struct ruby_thread){.addr = node, .tid = tid, .fd = -1, .pfd = -1, .stat_fd = -1};
      if (pp_remote_read((pid_t)t->pid, node, &node, sizeof(node)) < 0) ok = false;
    }
  }
  /* the tids are trusted only if the main thread's is the process's pid */
  bool supported = head && ruby_tids_known(st, t);
  ok = ok && n > 0 && saw_main;
  if (supported && !ok && t->per_thread && t->nthreads > 0) {
    /* a list read torn by threads coming and going: keep the threads (and
     * alarms) we have rather than dropping to the GVL holder; soon again */
    t->threads_changed = true;
    return -EAGAIN;
  }
  /* keep the open stat files and CPU alarms of threads we already knew */
  bool matched[RUBY_MAX_THREADS_HARD] = {false};
  uint32_t nkept = 0;
  for (uint32_t i = 0; i < t->nthreads; i++) {
    struct ruby_thread *old = &t->threads[i];
    bool kept = false;
    for (uint32_t j = 0; ok && j < n && !kept; j++) {
      if (!matched[j] && fresh[j].addr == old->addr && fresh[j].tid == old->tid) {
        fresh[j] = *old;
        matched[j] = kept = true;
      }
    }
    if (!kept)
      thread_close(st, old);
    else
      nkept++;
  }
  if (!ok) n = 0;
  t->threads_changed = nkept != n || nkept != t->nthreads;
  memcpy(t->threads, fresh, n * sizeof(fresh[0]));
  t->nthreads = n;
  if (t->per_thread != ok && t->state == RUBY_T_OK)
    RUBY_LOG(st, PP_LOG_DEBUG, "pid %u: %s", t->pid,
             ok ? "sampling every Ruby thread" : "sampling the GVL holder only");
  t->per_thread = ok;
  return ok ? 0 : -ENOENT;
}

/* Reads the thread's stat (state letter) or schedstat (run time in ns)
 * through its kept-open fd. 0 or -1. */
static int pread_task(struct ruby_target *t, struct ruby_thread *th, char *buf, size_t cap) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (th->fd < 0) {
      char path[80];
      snprintf(path, sizeof(path), "/proc/%u/task/%u/%s", t->pid, th->tid,
               th->use_stat ? "stat" : "schedstat");
      th->fd = open(path, O_RDONLY | O_CLOEXEC);
      if (th->fd < 0) {
        if (th->use_stat || errno != ENOENT) return -1;
        th->use_stat = true; /* kernel without schedstats: the state letter */
        continue;
      }
    }
    ssize_t n = pread(th->fd, buf, cap - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      return 0;
    }
    close(th->fd); /* the thread ended: a fresh open tells for sure */
    th->fd = -1;
  }
  return -1;
}

bool ruby_thread_on_cpu(struct ruby_target *t, struct ruby_thread *th) {
  if (!th->tid) return false;
  char buf[512];
  if (pread_task(t, th, buf, sizeof(buf)) < 0) return false;
  if (th->use_stat) return state_of(buf) == 'R';
  /* schedstat: "<ns on cpu> <ns waiting> <slices>". A thread that did not
   * run since the last tick is still where the last sample saw it: counting
   * it again would weigh the time it waited in a run queue as CPU time. */
  unsigned long long ran = strtoull(buf, NULL, 10);
  bool moved = ran != th->runtime;
  th->runtime = ran;
  if (!moved) return false;
  /* It ran since the last tick, but the stack read now is where it is now:
   * a thread that burnt 10 ms and then slept would be sampled in sleep
   * (every tick of a mostly idle server). Only a thread that is also
   * running (or runnable, preempted in its code) right now is sampled. */
  if (th->stat_fd < 0) {
    char path[80];
    snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", t->pid, th->tid);
    th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (th->stat_fd < 0) return true; /* keep the schedstat answer */
  }
  ssize_t n = pread(th->stat_fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) {
    close(th->stat_fd);
    th->stat_fd = -1;
    return false; /* ended between the two reads */
  }
  buf[n] = '\0';
  return state_of(buf) == 'R';
}
