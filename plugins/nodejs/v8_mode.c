/* SPDX-License-Identifier: Apache-2.0 */
/*
 * v8 mode targets (see v8_mode.h): the kit's target table, one V8 layout,
 * stack reader and perf sampler per Node process, and the stacks of all of
 * them in one stack table emitted at each snapshot.
 *
 * attach() finds the module holding V8 (libnode.so, else the executable)
 * through the kit's target-file access, reads its post-mortem metadata and
 * opens the perf events. A process without usable metadata is skipped with
 * the reason (a copy of another program named node, a Node built without
 * the metadata, an unknown layout); perf refusing the events fails it.
 *
 * JS frames carry their tier; C++ frames of the chain are named from the
 * process's ELF symbols (v8_native.c). A sample in which nothing could be
 * named counts as "(program)" on the main thread (C++ or the GC, as in
 * V8's own profiles) and "(native thread)" on the others (GC and compiler
 * helpers, libuv), so the process's CPU is all accounted for; a process
 * that burns CPU and shows
 * no JS frame at all in a session gets an error status saying why.
 */
#include "v8_mode.h"
#include "polyprof/kit/proc_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodeproc.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"
#include "polyprof/kit/stack_table.h"
#include "polyprof/kit/target_table.h"
#include "polyprof/kit/thread_snapshot.h"
#include "v8_inline.h"
#include "v8_layout.h"
#include "v8_native.h"
#include "v8_sample.h"
#include "v8_walk.h"

#define RESCAN_NS 1000000000ull /* thread list followed this often */
#define BUSY_SAMPLES 10         /* fewer samples without JS are not worth a status */

struct v8_target {
  uint32_t pid;
  struct v8_reader rd;
  struct v8_sampler smp;
  struct v8_native *native;
  uint64_t next_rescan_ns;
  struct v8_walk_stats last; /* reader stats at the previous snapshot */
  uint64_t lost_reported;
  char module[200];
  char appid[600]; /* set for .mjs/.cjs entry points (the core's rule knows .js) */
};

struct nodejs_v8 {
  const struct pp_host *host;
  struct nodejs_v8_config cfg;
  struct pp_target_table *tt;
  struct pp_stack_table *stacks;
  struct v8_walk_stats sum; /* counters since the last snapshot, all targets */
  uint64_t lost;
  uint64_t switch_lost; /* wall / off-CPU: times off a CPU not credited */
};

static int skip(struct pp_target_entry *e, const char *why) {
  snprintf(e->reason, sizeof(e->reason), "nodejs: %s", why);
  return PP_ATTACH_SKIP;
}

/* The module holding V8: libnode.so if mapped, else the executable. */
static int find_v8_module(uint32_t pid, struct pp_module *m, char *why, size_t whylen) {
  why[0] = '\0';
  int rc = pp_find_module(pid, "libnode.so*", m, why, whylen);
  if (rc != -ENOENT) return rc;
  char exe[PP_PATH_MAX];
  rc = pp_proc_exe(pid, exe, sizeof(exe));
  if (rc < 0) return rc;
  char *del = strstr(exe, " (deleted)");
  if (del) *del = '\0';
  const char *base = strrchr(exe, '/');
  base = base ? base + 1 : exe;
  why[0] = '\0';
  return pp_find_module(pid, base, m, why, whylen);
}

static int v8_attach(void *plugin, struct pp_target_entry *e) {
  struct nodejs_v8 *v = plugin;
  char why[160];
  struct pp_module *m = calloc(1, sizeof(*m));
  if (!m) return -ENOMEM;
  m->fd = -1;
  int rc = find_v8_module(e->pid, m, why, sizeof(why));
  if (rc < 0) {
    pp_module_close(m);
    free(m);
    if (rc == -ESRCH) return rc;
    if (why[0]) return skip(e, why);
    snprintf(e->reason, sizeof(e->reason), "nodejs: its executable cannot be read (%s)",
             strerror(-rc));
    return rc;
  }
  struct v8_layout L;
  rc = v8_layout_load(e->pid, m->fd, m->bias, &L, why, sizeof(why));
  struct v8_target *t = calloc(1, sizeof(*t));
  struct pp_file_id v8_file = m->id;
  if (t) snprintf(t->module, sizeof(t->module), "%.*s", (int)sizeof(t->module) - 1, m->path);
  pp_module_close(m);
  free(m);
  if (!t) return -ENOMEM;
  if (rc < 0) {
    free(t);
    if (rc == -ESRCH) return rc;
    if (rc == -ENOTSUP) return skip(e, why);
    snprintf(e->reason, sizeof(e->reason), "nodejs: %s", why);
    return rc;
  }
  t->pid = e->pid;
  rc = v8_reader_init(&t->rd, e->pid, &L, v->cfg.cache_entries);
  if (rc == 0 && !(t->native = v8_native_new(e->pid, &v8_file))) rc = -ENOMEM;
  if (rc == 0)
    rc = v8_sampler_open(
        &t->smp, e->pid, v->cfg.hz, v->cfg.stack_bytes, v->cfg.max_threads,
        (v->cfg.wall ? V8_SAMPLE_WALL : 0) | (v->cfg.offcpu ? V8_SAMPLE_OFFCPU : 0));
  if (rc < 0) {
    v8_native_free(t->native);
    v8_reader_free(&t->rd);
    free(t);
    if (rc == -ESRCH) return rc;
    snprintf(e->reason, sizeof(e->reason), "nodejs: perf_event_open on its threads failed: %s",
             strerror(-rc));
    return rc == -EACCES || rc == -EPERM || rc == -ENOSYS ? PP_ATTACH_FAIL : rc;
  }
  t->rd.native = v8_native_frame;
  t->rd.in_v8_module = v8_native_in_v8;
  t->rd.native_ctx = t->native;
  t->next_rescan_ns = pp_clock_ns() + RESCAN_NS;
  if (nodejs_appid(e->pid, t->appid, sizeof(t->appid)) < 0 || strstr(t->appid, ".js ("))
    t->appid[0] = '\0';
  e->data = t;
  PP_INFO(v->host, "pid %u: V8 metadata of %s read; sampling %zu threads out of process", e->pid,
          t->module, t->smp.nth);
  return 0;
}

static void add_stats(struct v8_walk_stats *sum, const struct v8_walk_stats *now,
                      const struct v8_walk_stats *last) {
  sum->samples += now->samples - last->samples;
  sum->js_samples += now->js_samples - last->js_samples;
  sum->torn += now->torn - last->torn;
  sum->no_js += now->no_js - last->no_js;
  sum->short_copy += now->short_copy - last->short_copy;
  sum->cache_miss += now->cache_miss - last->cache_miss;
  sum->scanned += now->scanned - last->scanned;
  sum->inlined += now->inlined - last->inlined;
  sum->unclassified += now->unclassified - last->unclassified;
  sum->native += now->native - last->native;
}

/* The rings hold six samples per thread: drained every three sampling
 * periods (a wake-up of the worker costs more than a sample), at least
 * 10 ms and at most 250 ms apart. */
uint64_t nodejs_v8_tick_ns(uint32_t hz) {
  uint64_t ns = 3000000000ull / (hz ? hz : 11);
  if (ns < 10000000ull) ns = 10000000ull;
  if (ns > 250000000ull) ns = 250000000ull;
  return ns;
}

struct drain_ctx {
  struct nodejs_v8 *v;
  struct v8_target *t;
};

static struct pp_frame frames[V8_MAX_FRAMES];

static int has_js(const struct pp_frame *f, int n) {
  for (int i = 0; i < n; i++)
    if (f[i].kind != PP_FRAME_NATIVE) return 1;
  return 0;
}

static void on_sample(void *ctx, const struct v8_raw_sample *s) {
  struct drain_ctx *d = ctx;
  int n = v8_walk(&d->t->rd, s, frames, V8_MAX_FRAMES);
  if (n < 0) return;             /* torn: counted, never emitted */
  if (d->v->host->abi_minor < 4) /* a host before the JS tier kinds refuses them */
    for (int i = 0; i < n; i++)
      if (frames[i].kind >= PP_FRAME_JS_INTERPRETED && frames[i].kind <= PP_FRAME_JS_BUILTIN)
        frames[i].kind = PP_FRAME_JS;
  /* the main thread off its CPU without JS is the event loop waiting,
   * V8's "(idle)", whatever C++ it waits in (uv_run, epoll_wait) */
  if (n > 0 && s->off_cpu && s->tid == d->t->pid && !has_js(frames, n)) n = 0;
  if (n == 0) {
    /* nothing named: the main thread in C++ or the GC is V8's
     * "(program)"; other threads without JS are Node's and V8's helpers
     * (GC, compilers, libuv) */
    frames[0] = (struct pp_frame){.name = s->tid != d->t->pid ? "(native thread)"
                                          : s->off_cpu        ? "(idle)"
                                                              : "(program)",
                                  .kind = PP_FRAME_PSEUDO};
    n = 1;
  }
  /* frames are leaf first; the stack table wants the same */
  pp_stack_table_add_typed(d->v->stacks, s->type, d->t->pid, s->tid, NULL, frames, (uint32_t)n,
                           s->count);
}

static void v8_release(void *plugin, struct pp_target_entry *e) {
  struct nodejs_v8 *v = plugin;
  struct v8_target *t = e->data;
  if (!t) return;
  /* what the kernel recorded before the process ended (or exec'd) */
  struct drain_ctx d = {v, t};
  v8_sampler_drain(&t->smp, on_sample, &d);
  add_stats(&v->sum, &t->rd.st, &t->last);
  v->lost += t->smp.lost - t->lost_reported;
  v8_sampler_close(&t->smp);
  v8_inline_forget(t->rd.pid);
  v8_native_free(t->native);
  v8_reader_free(&t->rd);
  free(t);
  e->data = NULL;
}

struct nodejs_v8 *nodejs_v8_new(const struct pp_host *host, const struct nodejs_v8_config *cfg) {
  struct nodejs_v8 *v = calloc(1, sizeof(*v));
  if (!v) return NULL;
  v->host = host;
  v->cfg = *cfg;
  static const struct pp_target_ops ops = {.attach = v8_attach, .release = v8_release};
  struct pp_target_table_config tc = {
      .max_targets = cfg->max_targets,
      .retry_max_ns = cfg->retry_ns,
      .liveness_ns = 1000000000ull,
  };
  struct pp_stack_table_limits lim = {.max_depth = cfg->max_depth};
  v->tt = pp_target_table_new(host, &ops, v, &tc);
  v->stacks = pp_stack_table_new(&lim);
  if (!v->tt || !v->stacks) {
    nodejs_v8_free(v);
    return NULL;
  }
  return v;
}

void nodejs_v8_free(struct nodejs_v8 *v) {
  if (!v) return;
  pp_target_table_free(v->tt);
  pp_stack_table_free(v->stacks);
  free(v);
}

int nodejs_v8_add(struct nodejs_v8 *v, const struct pp_target *tg, size_t n) {
  return pp_target_table_add(v->tt, tg, n);
}

void nodejs_v8_tick(struct nodejs_v8 *v) {
  uint64_t now = pp_clock_ns();
  pp_target_table_poll(v->tt, now);
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(v->tt, e, PP_TARGET_ATTACHED) {
    struct v8_target *t = e->data;
    if (now >= t->next_rescan_ns) {
      t->next_rescan_ns = now + RESCAN_NS;
      if (v8_sampler_rescan(&t->smp) == -ESRCH) {
        pp_target_table_gone(v->tt, e); /* drains what it did before it ended */
        continue;
      }
    }
    struct drain_ctx d = {v, t};
    v8_sampler_drain(&t->smp, on_sample, &d);
  }
}

/* A process that ran and showed no JS frame: say why. */
static void busy_status(struct nodejs_v8 *v, struct pp_sink *sink, uint32_t pid,
                        const struct v8_walk_stats *d) {
  if (d->samples < BUSY_SAMPLES || d->js_samples) return;
  char why[200];
  snprintf(why, sizeof(why),
           "nodejs: %llu samples without a JS frame (%llu torn reads, %llu in native code or "
           "the GC, %llu stack copies too short)",
           (unsigned long long)d->samples, (unsigned long long)d->torn,
           (unsigned long long)d->no_js, (unsigned long long)d->short_copy);
  v->host->set_pid_status(sink, pid, PP_PID_ERROR, why);
}

void nodejs_v8_snapshot(struct nodejs_v8 *v, struct pp_sink *sink) {
  const struct pp_host *h = v->host;
  nodejs_v8_tick(v);
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(v->tt, e, PP_TARGET_ATTACHED) {
    struct v8_target *t = e->data;
    struct v8_walk_stats d = {0};
    add_stats(&d, &t->rd.st, &t->last);
    busy_status(v, sink, t->pid, &d);
    if (t->appid[0]) h->set_appid(sink, t->pid, t->appid);
    add_stats(&v->sum, &t->rd.st, &t->last);
    t->last = t->rd.st;
    v->lost += t->smp.lost - t->lost_reported;
    t->lost_reported = t->smp.lost;
    v->switch_lost += t->smp.switch_lost;
    t->smp.switch_lost = 0;
  }
  pp_stack_table_emit(v->stacks, h, sink);
  pp_target_table_report(v->tt, sink);
  h->add_counter(sink, "v8_samples", v->sum.samples);
  h->add_counter(sink, "v8_js_samples", v->sum.js_samples);
  h->add_counter(sink, "v8_torn_samples", v->sum.torn);
  h->add_counter(sink, "v8_short_stack_copies", v->sum.short_copy);
  h->add_counter(sink, "v8_function_lookups", v->sum.cache_miss);
  h->add_counter(sink, "v8_exit_frame_scans", v->sum.scanned);
  h->add_counter(sink, "v8_inlined_frames", v->sum.inlined);
  h->add_counter(sink, "v8_unclassified_frames", v->sum.unclassified);
  h->add_counter(sink, "v8_native_frames", v->sum.native);
  h->add_counter(sink, "v8_symbol_table_bytes", v8_native_bytes());
  h->add_counter(sink, "lost_samples", v->lost);
  if (v->switch_lost) h->add_counter(sink, "v8_switches_lost", v->switch_lost);
  v->switch_lost = 0;
  memset(&v->sum, 0, sizeof(v->sum));
  v->lost = 0;
}

/* Threads of one process read by a dump; a process with more has its
 * first ones read. */
#define DUMP_MAX_THREADS 1024
#define DUMP_STOP_TIMEOUT_MS 50

/* One thread held an instant (the kit's snapshot) and walked as a sample
 * of the context-switch sampler is: its registers and stack copy. Only a
 * stack with a JS frame is emitted; a thread without one is left to the
 * native stack the perf plugin's dump() gives. */
static void dump_thread(struct nodejs_v8 *v, struct v8_target *t, uint32_t tid, uint8_t *stack,
                        size_t cap, struct pp_sink *sink) {
  struct pp_thread_snapshot snap;
  char why[256];
  if (pp_thread_snapshot(t->pid, tid, stack, cap, DUMP_STOP_TIMEOUT_MS, &snap, why, sizeof(why)) <
      0) {
    PP_DEBUG(v->host, "v8 dump: pid %u thread %u: %s", t->pid, tid, why);
    return;
  }
#if defined(__aarch64__)
  uint64_t bp = snap.regs[29]; /* x29, the frame pointer */
#else
  uint64_t bp = snap.regs[6]; /* PERF_REG_X86_BP */
#endif
  struct v8_raw_sample s = {.tid = tid,
                            .regs = {.bp = bp, .sp = snap.sp, .ip = snap.ip},
                            .stack = stack,
                            .stack_len = snap.stack_len,
                            .count = 1,
                            .type = PP_PROFILE_CPU,
                            .off_cpu = snap.state_before != 'R'};
  int n = v8_walk(&t->rd, &s, frames, V8_MAX_FRAMES);
  if (n <= 0 || !has_js(frames, n)) return;
  if (v->host->abi_minor < 4)
    for (int i = 0; i < n; i++)
      if (frames[i].kind >= PP_FRAME_JS_INTERPRETED && frames[i].kind <= PP_FRAME_JS_BUILTIN)
        frames[i].kind = PP_FRAME_JS;
  char path[64], comm[32] = "";
  size_t len = 0;
  snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", t->pid, tid);
  if (pp_read_file(path, comm, sizeof(comm), &len) == 0 && len && comm[len - 1] == '\n')
    comm[len - 1] = '\0';
  struct pp_sample smp = {.pid = t->pid,
                          .tid = tid,
                          .comm = comm[0] ? comm : NULL,
                          .frames = frames,
                          .nframes = (uint32_t)n,
                          .type = PP_PROFILE_CPU,
                          .count = 1};
  v->host->emit(sink, &smp);
}

int nodejs_v8_dump(struct nodejs_v8 *v, struct pp_sink *sink) {
  size_t cap = v->cfg.stack_bytes ? v->cfg.stack_bytes : 24 * 1024;
  uint8_t *stack = malloc(cap);
  uint32_t *tids = malloc(DUMP_MAX_THREADS * sizeof(*tids));
  if (!stack || !tids) {
    free(stack);
    free(tids);
    return -ENOMEM;
  }
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(v->tt, e, PP_TARGET_ATTACHED) {
    struct v8_target *t = e->data;
    size_t n = 0;
    if (pp_proc_threads(t->pid, tids, DUMP_MAX_THREADS, &n) < 0) continue;
    for (size_t i = 0; i < n; i++)
      dump_thread(v, t, tids[i], stack, cap, sink);
  }
  free(stack);
  free(tids);
  return 0;
}
