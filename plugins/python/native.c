/* SPDX-License-Identifier: Apache-2.0 */
/*
 * python.native (cpu mode): each thread of a target gets a perf cpu-clock
 * event (native_events.c); at every tick the plugin reads the samples the
 * kernel took since the last one, and for each:
 *   0. names the kernel frames (the kernel's callchain, user part off);
 *   1. unwinds the copied user stack with DWARF (the kit's unwinder, the
 *      objects' tables from native_objects.c): the native frames;
 *   2. reads that thread's Python stack right away;
 *   3. merges them, leaf first: native frames above the innermost run of
 *      the eval loop are kept (the C function Python called); each native
 *      frame of the eval loop (_PyEval_EvalFrameDefault, 2.7's
 *      PyEval_EvalFrameEx) is replaced by the Python frames of that run
 *      (<= 3.10: one frame; 3.11+: the frames up to the run's entry frame,
 *      py_frame_ref.entry); frames of the interpreter's own module between
 *      two runs are the interpreter's glue and dropped, any other (a C
 *      extension calling back into Python) kept; frames below the
 *      outermost run (main, the interpreter's startup) kept; the kernel
 *      frames go on top, and with python.thread_names the thread's
 *      <thread: NAME> frame at the root, as on plain stacks.
 * The Python stack is read after the kernel's sample (within a
 * tenth of the sampling interval on a host that lets the worker run), so it may have moved
 * meanwhile: when the number of eval-loop frames is not the number of
 * runs the Python stack shows, or the innermost Python frame is not
 * witnessed in the stack copy (witnessed()), no interleaving is guessed: the
 * sample is the Python stack alone (no native or kernel frame), and counted
 * (native_mismatches); so is a sample read more than PYN_STALE_NS after
 * the kernel took it (native_stale: the worker was kept off the CPU),
 * whatever the counts say.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"
#include "polyprof/kit/kallsyms.h"
#include "polyprof/kit/log.h"

#define SCRATCH_LEN (PYN_STACK_COPY + 4096u) /* one record: header, registers, stack copy */

struct pyn_target {
  uint32_t pid;
  const void *owner; /* the target entry's data: a new attach is a new target */
  struct pyn_thread th[PYN_THREADS];
  uint32_t nth;
  uint64_t scan_ns;
  struct pyn_maps maps;
  int open_err; /* the last perf_event_open error on one of its threads */
  bool seen, told_full, told_unsampled;
};

struct py_native {
  const struct pp_host *host;
  uint64_t period_ns;
  struct pyn_target *targets[PYN_TARGETS];
  struct pyn_objects *objs;
  uint8_t *scratch;
  struct pp_frame *out;
  uint32_t out_cap;
  uint64_t ips[PYN_MAX_NATIVE];
  struct {
    bool eval, interp;
  } cls[PYN_MAX_NATIVE];
  char names[PYN_MAX_NATIVE][PYN_NAME_MAX];
  int nips;
  /* kernel frames of the sample (named from /proc/kallsyms, read once
   * when the first one shows up; kallsyms_state < 0: unreadable) */
  char knames[PYN_MAX_KERNEL][PYN_NAME_MAX];
  uint32_t nk;
  struct pp_kallsyms *kallsyms;
  int kallsyms_state;
  /* the sample being merged */
  struct py_state *st;
  struct pp_target_entry *t;
  struct pyn_target *nt;
  uint32_t want_tid;
  bool delivered, stale;
  const uint8_t *stack; /* the sample's stack copy */
  uint64_t stack_len;
  char tframe[PY_THREAD_NAME_MAX + 16]; /* the sample's <thread: NAME> frame */
  /* this session */
  uint64_t samples, merged, mismatches, stale_count, no_python, lost, bad, unwind_errors,
      open_errors;
  int last_open_err;
  bool told_open, told_no_slot;
  uint64_t opened; /* events opened since start */
  /* the kernel refuses the events (no CAP_PERFMON, perf_event_paranoid,
   * a seccomp policy of a container): the plugin samples without native
   * frames, at its own interval again */
  bool refused;
  struct pp_session *session;
  uint64_t plain_tick_ns;
};

struct py_native *python_native_new(const struct pp_host *host, uint32_t max_depth) {
  struct py_native *n = calloc(1, sizeof(*n));
  if (!n) return NULL;
  n->host = host;
  n->out_cap = max_depth + PY_EXTRA_FRAMES + PYN_MAX_NATIVE + PYN_MAX_KERNEL + 2;
  n->out = calloc(n->out_cap, sizeof(*n->out));
  n->scratch = malloc(SCRATCH_LEN);
  n->objs = pyn_objects_new();
  if (!n->out || !n->scratch || !n->objs) {
    python_native_free(n);
    return NULL;
  }
  return n;
}

static void target_close(struct pyn_target *nt) {
  for (uint32_t i = 0; i < nt->nth; i++)
    pyn_thread_close(&nt->th[i]);
  pyn_maps_clear(&nt->maps);
  if (nt->maps.unw) pp_unwinder_free(nt->maps.unw);
  free(nt);
}

void python_native_free(struct py_native *n) {
  if (!n) return;
  for (size_t i = 0; i < PYN_TARGETS; i++)
    if (n->targets[i]) target_close(n->targets[i]);
  pyn_objects_free(n->objs);
  if (n->kallsyms) pp_kallsyms_free(n->kallsyms);
  free(n->out);
  free(n->scratch);
  free(n);
}

void python_native_start(struct py_native *n, uint64_t frequency_hz, struct pp_session *session,
                         uint64_t plain_tick_ns) {
  n->period_ns = frequency_hz ? 1000000000ull / frequency_hz : 10000000ull;
  n->session = session;
  n->plain_tick_ns = plain_tick_ns;
}

bool python_native_refused(const struct py_native *n) {
  return n->refused;
}

static void refuse(struct py_native *n, int err) {
  n->refused = true;
  if (n->session) n->session->tick_interval_ns = n->plain_tick_ns;
  PP_ERROR(n->host,
           "python.native: perf_event_open refused (%s): no native frames; Python stacks are "
           "sampled without them (needs CAP_PERFMON, or kernel.perf_event_paranoid <= 1)",
           strerror(-err));
}

/* Opens an event on every thread of the target not watched yet, closes
 * those of threads gone. */
static void rescan(struct py_native *n, struct pyn_target *nt, uint64_t now) {
  nt->scan_ns = now;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", nt->pid);
  DIR *d = opendir(path);
  if (!d) return;
  for (uint32_t i = 0; i < nt->nth; i++)
    nt->th[i].seen = false;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
    bool known = false;
    for (uint32_t i = 0; i < nt->nth && !known; i++)
      if (nt->th[i].tid == tid) known = nt->th[i].seen = true;
    if (known) continue;
    if (nt->nth == PYN_THREADS) {
      if (!nt->told_full)
        PP_INFO(n->host, "pid %u: more than %u threads, the others get no native frames", nt->pid,
                PYN_THREADS);
      nt->told_full = true;
      continue;
    }
    int rc = pyn_thread_open(&nt->th[nt->nth], tid, n->period_ns);
    if (rc < 0 && !n->opened && (rc == -EACCES || rc == -EPERM || rc == -ENOSYS)) {
      refuse(n, rc);
      break;
    }
    if (rc < 0) {
      n->open_errors++;
      n->last_open_err = rc;
      nt->open_err = rc;
      if (!n->told_open)
        PP_WARNING(n->host, "pid %u tid %u: perf_event_open for native frames failed: %s", nt->pid,
                   tid, strerror(-rc));
      n->told_open = true;
      continue;
    }
    nt->th[nt->nth++].seen = true;
    n->opened++;
  }
  closedir(d);
  for (uint32_t i = 0; i < nt->nth;) {
    if (nt->th[i].seen) {
      i++;
      continue;
    }
    pyn_thread_close(&nt->th[i]);
    nt->th[i] = nt->th[--nt->nth];
  }
}

static bool pred_tid(void *ctx, uint32_t ns_tid) {
  struct py_native *n = ctx;
  uint32_t tid = python_host_tid(n->st, n->t, ns_tid);
  /* <= 3.10 without a known struct pthread layout: only the main thread
   * can be told */
  if (!tid) return n->want_tid == n->t->pid;
  return tid == n->want_tid;
}

static void put(struct py_native *n, uint32_t *k, struct pp_frame f) {
  if (*k < n->out_cap) n->out[(*k)++] = f;
}

/* The kernel frames of a sample, innermost first, into n->knames. */
static void name_kernel(struct py_native *n, const struct pyn_sample *s) {
  n->nk = 0;
  if (!s->nkips) return;
  if (!n->kallsyms_state) {
    int rc = pp_kallsyms_load(NULL, &n->kallsyms);
    n->kallsyms_state = rc < 0 ? rc : 1;
    if (rc < 0)
      PP_INFO(n->host, "python.native: no kernel frames (/proc/kallsyms: %s)", strerror(-rc));
  }
  if (n->kallsyms_state < 0) return;
  for (uint32_t i = 0; i < s->nkips && i < PYN_MAX_KERNEL; i++) {
    const char *name = pp_kallsyms_lookup(n->kallsyms, s->kips[i], NULL, NULL);
    snprintf(n->knames[n->nk++], PYN_NAME_MAX, "%s", name ? name : "[unknown]");
  }
}

static void put_kernel(struct py_native *n, uint32_t *k) {
  for (uint32_t i = 0; i < n->nk; i++)
    put(n, k, (struct pp_frame){.name = n->knames[i], .kind = PP_FRAME_KERNEL});
}

/* With python.thread_names, the root frame <thread: NAME> of thread
 * ns_tid, as plain stacks have it. */
static void put_thread(struct py_native *n, uint32_t *k, uint32_t ns_tid) {
  const char *name = n->st->thread_names && ns_tid ? python_thread_name(n->st, ns_tid) : NULL;
  if (!name) return;
  snprintf(n->tframe, sizeof(n->tframe), "<thread: %s>", name);
  put(n, k, (struct pp_frame){.name = n->tframe, .kind = PP_FRAME_PSEUDO});
}

/* The tid inside the target's pid namespace of its host thread tid (0:
 * unknown), from the map the sampler keeps. */
static uint32_t ns_tid_of(const struct pp_target_entry *t, uint32_t tid) {
  const struct py_target *pt = t->data;
  if (pt->proc.ns_pid == t->pid) return tid;
  for (uint32_t i = 0; i < pt->nns; i++)
    if (pt->ns_map[i][1] == tid) return pt->ns_map[i][0];
  return 0;
}

static struct pp_frame native_frame(struct py_native *n, int i) {
  return (struct pp_frame){.name = n->names[i], .kind = PP_FRAME_PYTHON_NATIVE};
}

static struct pp_frame python_frame(const struct py_frame_ref *f) {
  return (struct pp_frame){.name = f->code->name,
                           .file = f->code->file,
                           .line = (uint32_t)f->line,
                           .kind = PP_FRAME_PYTHON};
}

/* Counts can agree on a stack that moved: a loop calling zlib, then
 * another at the same depth calling memset, read after the switch. So
 * the innermost Python frame must also be seen in the stack copy taken
 * with the sample: the interpreter loop running it keeps its code
 * object's address (<= 3.10, and often 3.12+) or a pointer into its
 * bytecode near the instruction being run (3.11+) in its C frame, where
 * the calls below it save them. */
static bool witnessed(const struct py_native *n, const struct py_frame_ref *frames, uint32_t nf) {
  const struct py_code *leaf = NULL;
  for (uint32_t i = 0; i < nf && !leaf; i++)
    leaf = frames[i].code;
  if (!leaf) return false;
  uint64_t ip = python_walker_leaf_ip(n->st->walker);
  for (uint64_t o = 0; o + 8 <= n->stack_len; o += 8) {
    uint64_t v;
    memcpy(&v, n->stack + o, 8);
    if (v == leaf->addr || (ip && v + PYN_IP_SLACK >= ip && v <= ip + PYN_IP_SLACK)) return true;
  }
  return false;
}

static void on_py_stack(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t nf,
                        bool truncated) {
  struct py_native *n = ctx;
  if (n->delivered) return; /* one thread per sample */
  n->delivered = true;
  uint32_t runs = 0, evals = 0, k = 0;
  for (uint32_t i = 0; i < nf; i++)
    if (frames[i].code && frames[i].entry) runs++;
  for (int i = 0; i < n->nips; i++)
    if (n->cls[i].eval) evals++;
  /* Python frames past the last run's entry frame would have no eval
   * frame to stand in */
  bool tail = false;
  for (uint32_t i = nf; i-- > 0;) {
    if (!frames[i].code) continue;
    tail = !frames[i].entry;
    break;
  }
  if (evals == runs && evals > 0 && !tail && !n->stale && witnessed(n, frames, nf)) {
    put_kernel(n, &k);
    uint32_t pi = 0, ev = 0;
    for (int i = 0; i < n->nips; i++) {
      if (n->cls[i].eval) {
        while (pi < nf) {
          const struct py_frame_ref *f = &frames[pi++];
          if (!f->code) continue;
          put(n, &k, python_frame(f));
          if (f->entry) break;
        }
        ev++;
      } else if (ev == 0 || ev == evals || !n->cls[i].interp) {
        put(n, &k, native_frame(n, i));
      }
    }
    n->merged++;
  } else {
    /* the native and kernel frames belong to the moment of the sample,
     * the Python stack to the read: with no proof that they meet, a
     * native leaf could sit under the wrong Python frame, so the sample
     * is the Python stack alone */
    for (uint32_t i = 0; i < nf; i++)
      if (frames[i].code) put(n, &k, python_frame(&frames[i]));
    if (n->stale)
      n->stale_count++;
    else
      n->mismatches++;
  }
  if (truncated)
    put(n, &k, (struct pp_frame){.name = "[Truncated Stack]", .kind = PP_FRAME_PYTHON_ERROR});
  put_thread(n, &k, tid);
  struct py_target *pt = n->t->data;
  if (k && pp_stack_table_add(n->st->stacks, n->t->pid, 0, NULL, n->out, k, 1) == 0) pt->stacks++;
}

static void on_sample(void *ctx, const struct pyn_sample *s) {
  struct py_native *n = ctx;
  struct pyn_target *nt = n->nt;
  struct py_target *pt = n->t->data;
  if (s->pid != nt->pid) {
    n->bad++;
    return;
  }
  n->samples++;
  pt->samples++;
  pt->ran_since_check = true; /* it ran: the periodic exec check applies */
  n->nips = 0;
  if (s->have_regs && s->stack && nt->maps.unw) {
    struct pyn_unwind_arg a = {.c = n->objs, .m = &nt->maps, .now_ns = n->st->now_ns};
    int failed = 0;
    n->nips = pp_unwind_stack(nt->maps.unw, s->regs, s->stack, s->stack_len, pyn_find_object, &a,
                              n->ips, PYN_MAX_NATIVE, &failed);
    if (failed) n->unwind_errors++;
  }
  const struct py_proc *p = &pt->proc;
  for (int i = 0; i < n->nips; i++) {
    /* a return address may be the first byte after a call that never
     * returns: name the call's own function */
    uint64_t ip = i ? n->ips[i] - 1 : n->ips[i];
    struct pyn_where w;
    pyn_locate(n->objs, &nt->maps, ip, n->st->now_ns, &w);
    n->cls[i].eval = pyn_is_eval(&w);
    n->cls[i].interp = ip >= p->map_lo && ip < p->map_hi;
    const char *name = pyn_name(&w, n->names[i], PYN_NAME_MAX);
    if (name != n->names[i]) snprintf(n->names[i], PYN_NAME_MAX, "%s", name);
    /* a versioned name from a .symtab: "__libc_start_main@@GLIBC_2.34" */
    char *at = strchr(n->names[i], '@');
    if (at && at != n->names[i]) *at = '\0';
  }
  name_kernel(n, s);
  /* the Python stack is read now: long after the sample it says nothing
   * of the thread at the time of the sample */
  uint64_t now = pp_clock_ns();
  n->stale = now > s->time && now - s->time > PYN_STALE_NS;
  n->want_tid = s->tid;
  n->stack = s->stack;
  n->stack_len = s->stack_len;
  n->delivered = false;
  struct py_sample_result res;
  int rc = python_sample(n->st->walker, &pt->proc, n->st->cc, PY_RUNNING_THREADS, pred_tid,
                         on_py_stack, n, &res);
  if (rc < 0 || res.failed) pt->failed++;
  if (!n->delivered && rc >= 0 && !res.failed && n->nips > 0) {
    /* a thread that runs no Python now: its native stack alone */
    uint32_t k = 0;
    put_kernel(n, &k);
    for (int i = 0; i < n->nips; i++)
      put(n, &k, native_frame(n, i));
    put_thread(n, &k, ns_tid_of(n->t, s->tid));
    if (pp_stack_table_add(n->st->stacks, n->t->pid, 0, NULL, n->out, k, 1) == 0) pt->stacks++;
    n->no_python++;
  }
}

static struct pyn_target *target_for(struct py_native *n, struct pp_target_entry *t) {
  struct pyn_target **free_slot = NULL;
  for (size_t i = 0; i < PYN_TARGETS; i++) {
    struct pyn_target *nt = n->targets[i];
    if (!nt) {
      if (!free_slot) free_slot = &n->targets[i];
      continue;
    }
    if (nt->pid == t->pid && nt->owner == t->data) return nt;
  }
  if (!free_slot) return NULL;
  struct pyn_target *nt = calloc(1, sizeof(*nt));
  if (!nt) return NULL;
  nt->pid = t->pid;
  nt->owner = t->data;
  nt->maps.pid = t->pid;
  /* one unwinder per process: libunwind may then remember per address
   * what it worked out, most of the cost of an unwind */
  if (pp_unwinder_new(&nt->maps.unw) == 0) pp_unwinder_cache(nt->maps.unw, 1);
  *free_slot = nt;
  return nt;
}

void python_native_tick(struct py_state *st, uint64_t now) {
  struct py_native *n = st->native;
  if (n->refused) return;
  n->st = st;
  for (size_t i = 0; i < PYN_TARGETS; i++)
    if (n->targets[i]) n->targets[i]->seen = false;
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(st->targets, t, PP_TARGET_ATTACHED) {
    struct pyn_target *nt = target_for(n, t);
    if (!nt) continue;
    nt->seen = true;
    if (!nt->scan_ns || now - nt->scan_ns >= PYN_RESCAN_NS) rescan(n, nt, now);
    n->t = t;
    n->nt = nt;
    st->cur = t;
    for (uint32_t i = 0; i < nt->nth; i++)
      n->lost += pyn_thread_drain(&nt->th[i], n->scratch, SCRATCH_LEN, on_sample, n, &n->bad);
  }
  /* released targets (exit, exec): their events go at once */
  for (size_t i = 0; i < PYN_TARGETS; i++) {
    if (n->targets[i] && !n->targets[i]->seen) {
      target_close(n->targets[i]);
      n->targets[i] = NULL;
    }
  }
}

static struct pyn_target *target_of(struct py_native *n, const struct pp_target_entry *t) {
  for (size_t i = 0; i < PYN_TARGETS; i++)
    if (n->targets[i] && n->targets[i]->pid == t->pid && n->targets[i]->owner == t->data)
      return n->targets[i];
  return NULL;
}

/* With native frames every sample comes from a thread's perf event: a
 * target without one on any thread yields none however busy it is, and
 * its status (in the profile and the log) says why rather than leaving
 * an empty profile to guess at. */
static void report_unsampled(struct py_native *n, struct pp_sink *sink) {
  if (!n->st || n->refused) return;
  const struct pp_host *h = n->host;
  struct pp_target_entry *t;
  PP_TARGETS_FOREACH(n->st->targets, t, PP_TARGET_ATTACHED) {
    struct pyn_target *nt = target_of(n, t);
    char reason[160];
    int status = PP_PID_ERROR;
    if (!nt) {
      status = PP_PID_SKIPPED;
      snprintf(reason, sizeof(reason),
               "python.native: perf events on %u processes at most, none left for this one",
               PYN_TARGETS);
      if (!n->told_no_slot) PP_WARNING(h, "pid %u: %s", t->pid, reason);
      n->told_no_slot = true;
    } else if (nt->nth == 0 && nt->open_err) {
      snprintf(reason, sizeof(reason), "python.native: perf_event_open failed on every thread (%s)",
               strerror(-nt->open_err));
      if (!nt->told_unsampled) PP_WARNING(h, "pid %u: %s", t->pid, reason);
      nt->told_unsampled = true;
    } else {
      continue;
    }
    h->set_pid_status(sink, t->pid, status, reason);
  }
}

void python_native_report(struct py_native *n, struct pp_sink *sink) {
  const struct pp_host *h = n->host;
  report_unsampled(n, sink);
  h->add_counter(sink, "native_samples", n->samples);
  h->add_counter(sink, "native_merged", n->merged);
  h->add_counter(sink, "native_mismatches", n->mismatches);
  h->add_counter(sink, "native_stale", n->stale_count);
  h->add_counter(sink, "native_no_python", n->no_python);
  h->add_counter(sink, "native_lost", n->lost);
  if (n->bad) h->add_counter(sink, "native_bad_records", n->bad);
  if (n->unwind_errors) h->add_counter(sink, "native_unwind_errors", n->unwind_errors);
  if (n->open_errors) h->add_counter(sink, "native_open_errors", n->open_errors);
  PP_DEBUG(h, "native: %llu samples, %llu merged, %llu mismatched, %zu KiB of object tables",
           (unsigned long long)n->samples, (unsigned long long)n->merged,
           (unsigned long long)n->mismatches, pyn_objects_bytes(n->objs) / 1024);
  n->samples = n->merged = n->mismatches = n->stale_count = n->no_python = n->lost = n->bad = 0;
  n->unwind_errors = n->open_errors = 0;
}
