/* SPDX-License-Identifier: Apache-2.0 */
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
 * "On a CPU" is the kit's pp_thread_cpu_ran() (ruby_sampler.c): the
 * thread's run time advanced since the previous tick and it is in state R
 * now. That is stricter than rbspy's state R alone, which also holds for a
 * thread waiting in a run queue, and on a loaded machine counted one
 * preempted position many times.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"
#include "ruby.h"

#define MAX_TASKS_SCANNED 4096

bool ruby_any_task_running(struct ruby_target *t) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", t->pid);
  DIR *d = opendir(path);
  if (!d) return false;
  bool running = false;
  struct dirent *de;
  int n = 0;
  while (!running && (de = readdir(d)) && n++ < MAX_TASKS_SCANNED) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    char *end = NULL;
    unsigned long tid = strtoul(de->d_name, &end, 10);
    if (*end || !tid || tid > UINT32_MAX) continue;
    running = pp_thread_cpu_state(t->cpu, (uint32_t)tid) == 'R';
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
      !ruby_heap_ptr(main_th) ||
      pp_remote_read((pid_t)t->pid, main_th + (uint64_t)L->thread_pthread, &pt, 8) < 0 ||
      !ruby_heap_ptr(pt))
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
    if ((i & 1) && ruby_heap_ptr(word)) continue;
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
    if (!ruby_heap_ptr(pt)) return -EINVAL;
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
    if (!ruby_heap_ptr(base)) return -EINVAL;
  }
  int32_t v = 0;
  int rc = pp_remote_read((pid_t)t->pid, base + L->thread_tid, &v, sizeof(v));
  if (rc < 0) return rc;
  if (v <= 0 || v > (1 << 22)) return -EINVAL; /* pid_max bound */
  *tid = (uint32_t)v;
  return 0;
}

void ruby_threads_close(struct ruby_state *st, struct ruby_target *t) {
  (void)st;
  for (uint32_t i = 0; i < t->nthreads; i++)
    ruby_cpuclock_close(&t->threads[i]);
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
      if (!ruby_heap_ptr(node)) {
        ok = false;
        break;
      }
      uint32_t tid = 0;
      if (read_tid(st, t, node, &tid) == 0) {
        if (tid == t->ns_pid) saw_main = true;
        if (t->ns_pid != t->pid) tid = host_tid_of(t->pid, tid);
      }
      fresh[n++] = (struct ruby_thread){.addr = node, .tid = tid, .pfd = -1};
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
  /* keep the CPU alarms of threads we already knew (the task files of
   * threads gone are closed by pp_thread_cpu when a read fails or by the
   * snapshot's sweep) */
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
      ruby_cpuclock_close(old);
    else
      nkept++;
  }
  if (!ok) n = 0;
  t->threads_changed = nkept != n || nkept != t->nthreads;
  memcpy(t->threads, fresh, n * sizeof(fresh[0]));
  t->nthreads = n;
  if (t->per_thread != ok && t->entry->state == PP_TARGET_ATTACHED)
    PP_DEBUG(st->host, "pid %u: %s", t->pid,
             ok ? "sampling every Ruby thread" : "sampling the GVL holder only");
  t->per_thread = ok;
  return ok ? 0 : -ENOENT;
}
