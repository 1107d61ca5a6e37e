/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The python plugin's side of the kit's target table: what attach() does
 * with a new process (or a new image of one), what release() gives back,
 * and the plugin's own identity checks between the table's.
 *
 * A process handed over may be an interpreter still starting (no
 * _PyRuntime contents, no version yet): "not yet" is answered with
 * -ENOENT and the table retries on the schedule python.c gives it; after
 * the last attempt a process with no CPython in it is ignored (the core
 * hands over anything named python*, uwsgi, gunicorn*...), as a process
 * of another runtime. A version without a layout is skipped with the
 * version in the reason; a file the kit refused to open (a link, a FIFO,
 * a device or a mount planted where the target's binary or libpython was)
 * is skipped with the kit's reason; one that could not be opened at all
 * (gone from its path and from the mapping's own file) fails with it after
 * the last attempt.
 *
 * A target released while its process still runs is an exec (the table
 * saw a new executable, or the plugin saw a new memory layout): its next
 * attach logs it, once, naming the image it replaced.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/json.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"
#include "python.h"

#define CHECK_NS 1000000000ull /* identity check (exit, exec, pid reuse) */
#define MAX_RELEASED 4096      /* released targets remembered per session */

static struct py_released *released_of(struct py_state *st, uint32_t pid, uint64_t start_time) {
  for (size_t i = st->nreleased; i-- > 0;)
    if (st->released[i].pid == pid && st->released[i].start_time == start_time)
      return &st->released[i];
  return NULL;
}

/* Refusals of the kit's target-file access: a planted path, never a
 * "not yet" worth retrying. */
static bool refused_open(int rc) {
  return rc == -EXDEV || rc == -EINVAL || rc == -ELOOP || rc == -EPERM || rc == -EACCES ||
         rc == -ENOTDIR;
}

int python_attach(void *plugin, struct pp_target_entry *t) {
  struct py_state *st = plugin;
  struct py_released *prev = released_of(st, t->pid, t->start_time);
  if (prev && prev->exec_pending) {
    prev->exec_pending = false;
    PP_INFO(st->host,
            "pid %u: exec'd a new program image (was Python %s in %s); its state is dropped, "
            "looking for Python again",
            t->pid, prev->version, prev->module);
  }
  struct py_target *pt = calloc(1, sizeof(*pt));
  if (!pt) return -ENOMEM;
  char why[sizeof(t->reason)];
  /* read first: an exec during the locate then shows as a changed image */
  int rc = python_image_id(t->pid, &pt->image);
  if (rc == 0) rc = python_locate(t->pid, &pt->proc, why, sizeof(why));
  if (rc == 0) {
    pt->next_check_ns = pp_clock_ns() + CHECK_NS;
    /* <= 3.10: kernel tids come from glibc's struct pthread, needed by
     * cpu mode (thread states) and thread names */
    if (!pt->proc.off.ts_native_tid && (st->filter == PY_RUNNING_THREADS || st->thread_names) &&
        python_discover_tid_offset(&pt->proc) < 0)
      PP_INFO(
          st->host, "pid %u: thread ids not found (pthread scan); %s", t->pid,
          st->filter == PY_RUNNING_THREADS ? "all threads counted as running" : "no thread names");
    PP_INFO(st->host, "pid %u: Python %s%s in %s", t->pid, pt->proc.version,
            pt->proc.off.free_threaded ? " (free-threaded)" : "", pt->proc.module);
    if (pt->proc.off.free_threaded && st->filter == PY_GIL_THREAD)
      PP_WARNING(st->host,
                 "pid %u: free-threaded build: no GIL, gil mode samples no thread (cpu "
                 "mode: the threads on a CPU)",
                 t->pid);
    t->data = pt;
    return 0;
  }
  free(pt);
  if (rc == -ESRCH) return rc;
  if (rc == -ENOTSUP) {
    snprintf(t->reason, sizeof(t->reason), "%s", why);
    PP_WARNING(st->host, "pid %u: %s: not profiled", t->pid, why);
    return PP_ATTACH_SKIP;
  }
  if (why[0] && refused_open(rc)) {
    snprintf(t->reason, sizeof(t->reason), "%s", why);
    PP_WARNING(st->host, "pid %u: %s: not profiled", t->pid, why);
    return PP_ATTACH_SKIP;
  }
  if (why[0]) snprintf(t->reason, sizeof(t->reason), "%s", why);
  /* a file that holds CPython is mapped but could not be opened: say so
   * rather than take the process for one without Python */
  if (rc == -ENOENT && t->attempts >= PY_LOCATE_ATTEMPTS && why[0]) {
    PP_WARNING(st->host, "pid %u: %s: not profiled", t->pid, why);
    return PP_ATTACH_FAIL;
  }
  if (rc == -ENOENT && t->attempts >= PY_LOCATE_ATTEMPTS) {
    PP_INFO(st->host, "pid %u: no CPython interpreter found (%s); ignored", t->pid, strerror(-rc));
    return PP_ATTACH_IGNORE;
  }
  return rc; /* not yet: the table retries */
}

void python_release(void *plugin, struct pp_target_entry *t) {
  struct py_state *st = plugin;
  struct py_target *pt = t->data;
  if (!pt) return;
  uint64_t start = 0;
  char state = 0;
  bool running = pp_proc_start_state(t->pid, &start, &state) == 0 && start == t->start_time &&
                 state != 'Z' && state != 'X';
  if (!running && !pt->exit_logged)
    PP_INFO(st->host, "pid %u: exited; stopped sampling it", t->pid);
  if (st->nreleased == st->released_cap && st->released_cap < MAX_RELEASED) {
    size_t nc = st->released_cap ? st->released_cap * 2 : 16;
    struct py_released *g = realloc(st->released, nc * sizeof(*g));
    if (g) st->released = g, st->released_cap = nc;
  }
  if (st->nreleased < st->released_cap) {
    struct py_released *r = &st->released[st->nreleased++];
    *r = (struct py_released){.pid = t->pid,
                              .start_time = t->start_time,
                              .samples = pt->samples,
                              .failed = pt->failed,
                              .missed = pt->missed,
                              .stacks = pt->stacks,
                              .exec_pending = running};
    snprintf(r->version, sizeof(r->version), "%s", pt->proc.version);
    snprintf(r->module, sizeof(r->module), "%s", pt->proc.module);
  }
  pp_thread_cpu_free(pt->cpu);
  python_codecache_forget_pid(st->cc, t->pid);
  free(pt->tnames);
  free(pt);
  t->data = NULL;
}

void python_target_exited(struct py_state *st, struct pp_target_entry *t) {
  struct py_target *pt = t->data;
  PP_INFO(st->host, "pid %u: exited; stopped sampling it", t->pid);
  if (pt) pt->exit_logged = true;
  pp_target_table_gone(st->targets, t);
}

/* Once a second, after a failed sample, and when the core hands the pid
 * over again: did the process exit, get its pid reused, or exec a new
 * image? After an exec every address held (anchors, offsets, cached code
 * objects) belongs to the old image: all of it is dropped and the process
 * is located again. A Python that re-execs itself keeps its executable,
 * which the table's own check compares: the memory layout tells. */
void python_check_identity(struct py_state *st, struct pp_target_entry *t) {
  struct py_target *pt = t->data;
  pt->next_check_ns = st->now_ns + CHECK_NS;
  pt->last_check_ns = st->now_ns;
  struct py_image_id now;
  if (python_image_id(t->pid, &now) < 0 || now.start_time != t->start_time) {
    python_target_exited(st, t);
    return;
  }
  if (!python_image_same(&now, &pt->image)) pp_target_table_reattach(st->targets, t);
}

static void log_efficiency(struct py_state *st, uint32_t pid, uint64_t samples, uint64_t failed,
                           uint64_t missed, uint64_t stacks) {
  if (!samples) return;
  /* sampling efficiency per process, as profiling.sampling reports it */
  double eff = 100.0 * (double)(samples - failed) / (double)(samples + missed);
  PP_LOG(st->host, failed * 20 > samples || missed * 20 > samples ? PP_LOG_INFO : PP_LOG_DEBUG,
         "pid %u: %llu samples, %llu failed, %llu missed (efficiency %.1f%%), %llu stacks", pid,
         (unsigned long long)samples, (unsigned long long)failed, (unsigned long long)missed, eff,
         (unsigned long long)stacks);
}

static void set_version(struct py_state *st, struct pp_sink *sink, uint32_t pid,
                        const char *version) {
  char text[48], quoted[112], meta[160];
  snprintf(text, sizeof(text), "Python %s", version);
  pp_json_string(quoted, sizeof(quoted), text);
  snprintf(meta, sizeof(meta), "{\"python_version\": %s}", quoted);
  st->host->set_app_metadata(sink, pid, meta);
}

void python_report_targets(struct py_state *st, struct pp_sink *sink, uint64_t *samples,
                           uint64_t *failed, uint64_t *missed) {
  *samples = *failed = *missed = 0;
  /* released first: an exec'd target's current image names the version */
  for (size_t i = 0; i < st->nreleased; i++) {
    struct py_released *r = &st->released[i];
    *samples += r->samples, *failed += r->failed, *missed += r->missed;
    struct pp_target_entry *now = pp_target_table_find(st->targets, r->pid);
    if (r->samples && !(now && now->state == PP_TARGET_ATTACHED))
      set_version(st, sink, r->pid, r->version);
    log_efficiency(st, r->pid, r->samples, r->failed, r->missed, r->stacks);
  }
  st->nreleased = 0;
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct py_target *pt = t->data;
    *samples += pt->samples, *failed += pt->failed, *missed += pt->missed;
    set_version(st, sink, t->pid, pt->proc.version);
    log_efficiency(st, t->pid, pt->samples, pt->failed, pt->missed, pt->stacks);
    st->asleep_skips += pt->skipped;
    pt->samples = pt->failed = pt->missed = pt->stacks = pt->idle = pt->skipped = 0;
    if (pt->tnames_fallback)
      PP_DEBUG(st->host,
               "pid %u: threading's thread names unreadable %llu times (kernel names used)", t->pid,
               (unsigned long long)pt->tnames_fallback);
    pt->tnames_fallback = 0;
    pt->ntnames = 0; /* thread names are read again each session (they change) */
    pt->tnames_read_ns = 0;
    pt->proc.ntids = 0;
    if (pt->cpu) pp_thread_cpu_sweep(pt->cpu);
  }
}
