/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dump(): the native stack every thread of the given pids is in now,
 * blocked ones included (a CPU sampler never sees a thread that sleeps).
 * Each thread is held for an instant by the kit (thread_snapshot.h) for
 * its registers and stack top, which go through the unwinder and
 * symbolizer the samples use; its kernel frames come from
 * /proc/PID/task/TID/stack when that is readable. A thread that cannot be
 * read (traced by another process, gone) gets a one-frame stack saying
 * why. Called once per `polyprof dump`, never on the sampling path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/proc_tree.h"
#include "polyprof/kit/thread_snapshot.h"

#define DUMP_MAX_THREADS 4096
#define DUMP_STOP_TIMEOUT_MS 50
#define DUMP_MIN_STACK (16u * 1024u)

/* Buffers of the one dump in progress; dump() is never concurrent. */
static struct pp_frame frames[PERF_MAX_FRAMES + 1];
static char kernel_names[1024];

static void emit_frames(struct perf_state *st, struct pp_sink *sink, uint32_t pid, uint32_t tid,
                        const char *comm, uint32_t n) {
  struct pp_sample smp = {.pid = pid,
                          .tid = tid,
                          .comm = comm[0] ? comm : NULL,
                          .frames = frames,
                          .nframes = n,
                          .type = PP_PROFILE_CPU,
                          .count = 1};
  st->host->emit(sink, &smp);
}

static void emit_reason(struct perf_state *st, struct pp_sink *sink, uint32_t pid, uint32_t tid,
                        const char *comm, const char *why) {
  char text[300];
  snprintf(text, sizeof(text), "[stack not read: %s]", why);
  frames[0] = (struct pp_frame){.name = text, .kind = PP_FRAME_ERROR};
  emit_frames(st, sink, pid, tid, comm, 1);
}

/* Kernel frames (innermost first) from the names the kit read; returns the
 * count placed at frames[0..]. */
static uint32_t kernel_frames(const char *names, uint32_t cap) {
  snprintf(kernel_names, sizeof(kernel_names), "%s", names);
  uint32_t n = 0;
  for (char *s = kernel_names; *s && n < cap;) {
    char *nl = strchr(s, '\n');
    if (nl) *nl = '\0';
    if (*s) frames[n++] = (struct pp_frame){.name = s, .kind = PP_FRAME_KERNEL};
    if (!nl) break;
    s = nl + 1;
  }
  return n;
}

static void dump_thread(struct perf_state *st, struct pp_sink *sink, struct perf_proc *p,
                        uint32_t tid, uint8_t *stack, size_t stack_cap, uint64_t *held_max) {
  char path[64], comm[PERF_COMM_LEN + 1] = "", why[256];
  snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", p->pid, tid);
  size_t len = 0;
  if (pp_read_file(path, comm, sizeof(comm), &len) == 0 && len && comm[len - 1] == '\n')
    comm[len - 1] = '\0';
  struct pp_thread_snapshot snap;
  int rc = pp_thread_snapshot(p->pid, tid, stack, stack_cap, DUMP_STOP_TIMEOUT_MS, &snap, why,
                              sizeof(why));
  if (rc == -ESRCH) return; /* exited since it was listed: not a thread any more */
  if (rc < 0) {
    PP_INFO(st->host, "dump: pid %u thread %u: %s", p->pid, tid, why);
    emit_reason(st, sink, p->pid, tid, comm, why);
    return;
  }
  if (snap.held_ns > *held_max) *held_max = snap.held_ns;
  uint32_t n = st->kernel ? kernel_frames(snap.kernel, PERF_MAX_FRAMES / 4) : 0;
  uint64_t ips[PERF_MAX_FRAMES];
  int nips = 0;
  if (perf_proc_need_maps(st, p) == 0) {
    if (snap.stack_len)
      nips = perf_unwind_user_regs(
          st, p, snap.regs, stack, snap.stack_len, ips,
          (int)(st->max_depth < PERF_MAX_FRAMES ? st->max_depth : PERF_MAX_FRAMES));
    if (nips <= 0) { /* no usable unwind: the leaf is still known */
      ips[0] = snap.ip;
      nips = 1;
    }
  }
  uint32_t ids[PERF_MAX_FRAMES];
  uint32_t nids = 0;
  for (int i = 0; i < nips && nids < PERF_MAX_FRAMES; i++)
    ids[nids++] = perf_sym_user(st, p, ips[i], i == 0);
  nids = perf_sym_fold_jit(st, ids, nids);
  for (uint32_t i = 0; i < nids && n < PERF_MAX_FRAMES; i++) {
    const struct perf_frame *f = &st->frames.v[ids[i]];
    frames[n++] = (struct pp_frame){.name = perf_frames_str(&st->frames, f->name),
                                    .file = perf_frames_str(&st->frames, f->file),
                                    .kind = f->kind};
  }
  if (!n) frames[n++] = (struct pp_frame){.name = "[unknown]", .kind = PP_FRAME_NATIVE};
  emit_frames(st, sink, p->pid, tid, comm, n);
}

int perf_dump(struct perf_state *st, struct pp_sink *sink) {
  /* every process of the host is not something to hold thread by thread */
  if (!st->npids) return 0;
  if (st->running) perf_drain(st); /* mappings up to date */
  if (!st->unwind && perf_unwind_init(&st->unwind) < 0) return -ENOMEM;
  size_t stack_cap = st->stack_size > DUMP_MIN_STACK ? st->stack_size : DUMP_MIN_STACK;
  uint8_t *stack = malloc(stack_cap);
  uint32_t *tids = malloc(DUMP_MAX_THREADS * sizeof(*tids));
  if (!stack || !tids) {
    free(stack);
    free(tids);
    return -ENOMEM;
  }
  for (size_t k = 0; k < st->npids; k++) {
    uint32_t pid = st->pids[k];
    if (pid == st->self_pid) continue;
    size_t n = 0;
    if (pp_proc_threads(pid, tids, DUMP_MAX_THREADS, &n) < 0) continue;
    struct perf_proc *p = perf_proc_get(st, pid, true);
    if (!p) continue;
    uint64_t held_max = 0, t0 = pp_clock_ns();
    for (size_t i = 0; i < n; i++)
      dump_thread(st, sink, p, tids[i], stack, stack_cap, &held_max);
    PP_DEBUG(st->host,
             "dump: pid %u, %zu threads, each stopped at most %llu us, all read in %llu ms", pid, n,
             (unsigned long long)(held_max / 1000),
             (unsigned long long)((pp_clock_ns() - t0) / 1000000));
  }
  free(stack);
  free(tids);
  return 0;
}
