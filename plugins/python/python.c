/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof python plugin: the descriptor, its options and the vtable (see
 * python.h for the map of the other files).
 *
 * The plugin reads CPython's own data structures out of a running process
 * with process_vm_readv: no code runs in the target, nothing is written to
 * it. Targets live in the kit's target table (attach.c), stacks in its
 * stack table (sampler.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "native.h"
#include "object_reader.h"
#include "polyprof/kit/cpu_switches.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/options.h"
#include "python.h"

static const char *const mode_choices[] = {"cpu",   "wall",   "gil",    "exception", "auto",
                                           "pyspy", "py-spy", "pyperf", NULL};
static const char *const exe_patterns[] = {"python*", "uwsgi",   "gunicorn*",
                                           "celery",  "uvicorn", NULL};
static const char *const map_patterns[] = {"libpython*.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .choices = mode_choices,
     .default_value = "cpu",
     .help =
         "cpu: running threads only; wall: every thread; gil: the GIL holder; "
         "exception: threads raising or handling an exception (auto/pyspy/py-spy/pyperf = cpu)"},
    {.key = "async_aware",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "asyncio (3.6+; 3.14+ through _asyncio's debug offsets): the running task and the "
             "chain of tasks awaiting it "
             "(await, gather, TaskGroup) as <task: NAME> frames; in wall mode also the "
             "waiting tasks"},
    {.key = "opcodes",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "3.11-3.13: the instruction the leaf frame executes, as an <op: NAME> leaf"},
    {.key = "main_thread_only",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "sample only each process's main thread"},
    {.key = "thread_names",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "a <thread: NAME> root frame on every stack (threading.Thread.name, else the "
             "kernel's thread name)"},
    {.key = "gc_frames",
     .cli_flag = "no-gc-frames",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "a <GC> leaf frame on the thread running the garbage collector"},
    {.key = "native",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "cpu mode: native frames below, between and above the Python frames (_[pn]), "
             "from per-thread perf events with a user stack copy unwound with DWARF"},
    {.key = "frequency",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 10000,
     .help = "samples per second per process; 0: the session frequency (10 kHz max)"},
    {.key = "blocking",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "hold the target's threads (ptrace) while reading, for exact stacks"},
    {.key = "code_cache_size",
     .type = PP_OPT_INT,
     .default_value = "8192",
     .min = 64,
     .max = 1 << 20,
     .help = "code objects cached (name, file, line table), all targets"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "1024",
     .min = 1,
     .max = PY_MAX_DEPTH_LIMIT,
     .help = "frames kept per stack (deeper: [Truncated Stack])"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "65536",
     .min = 256,
     .max = 1 << 22,
     .help = "distinct stacks kept per session (more: counted as dropped)"},
    {.key = "switch_records_from",
     .type = PP_OPT_INT,
     .default_value = "100",
     .min = 0,
     .max = 1 << 20,
     .help = "cpu mode: from this many targets on, learn which run from per-CPU context switch "
             "records instead of a look at each (0: never)"},
};

static void py_fini(void *state);

static int py_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct py_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->weight = 1;
  st->blocking = pp_opt_bool(host, PP_OPTIONS(options), "blocking");
  st->frequency = pp_opt_int(host, PP_OPTIONS(options), "frequency");
  bool gc_frames = pp_opt_bool(host, PP_OPTIONS(options), "gc_frames");
  bool main_only = pp_opt_bool(host, PP_OPTIONS(options), "main_thread_only");
  bool async_aware = pp_opt_bool(host, PP_OPTIONS(options), "async_aware");
  bool opcodes = pp_opt_bool(host, PP_OPTIONS(options), "opcodes");
  bool native = pp_opt_bool(host, PP_OPTIONS(options), "native");
  st->thread_names = pp_opt_bool(host, PP_OPTIONS(options), "thread_names");
  st->switches_from = (uint32_t)pp_opt_int(host, PP_OPTIONS(options), "switch_records_from");
  int64_t cache_size = pp_opt_int(host, PP_OPTIONS(options), "code_cache_size");
  int64_t depth = pp_opt_int(host, PP_OPTIONS(options), "max_depth");
  int64_t max_stacks = pp_opt_int(host, PP_OPTIONS(options), "max_stacks");
  st->max_depth = (uint32_t)(depth < 1                    ? 1
                             : depth > PY_MAX_DEPTH_LIMIT ? PY_MAX_DEPTH_LIMIT
                                                          : depth);
  st->cc = python_codecache_new((size_t)(cache_size > 0 ? cache_size : 64));
  st->walker = python_walker_new(st->max_depth);
  st->objs = python_objreader_new();
  if (st->walker) {
    python_walker_set_gc(st->walker, gc_frames);
    python_walker_set_main_only(st->walker, main_only);
    python_walker_set_async(st->walker, async_aware);
    python_walker_set_opcodes(st->walker, opcodes);
  }
  if (native) {
    /* the native frames say what <GC> and <op: NAME> would; task chains
     * would break the split of the stack into runs of the eval loop */
    if (st->walker) {
      python_walker_set_gc(st->walker, false);
      python_walker_set_opcodes(st->walker, false);
      python_walker_set_async(st->walker, false);
    }
    if (opcodes || async_aware)
      PP_INFO(host, "python.native: opcodes and async_aware are off with native frames");
    st->native = python_native_new(host, st->max_depth);
    if (!st->native) {
      py_fini(st);
      return -ENOMEM;
    }
  }
  /* frames: room for every stack at a typical depth; two more frames than
   * the walker keeps, for the [Truncated Stack] marker and the thread name */
  size_t stacks = (size_t)(max_stacks > 0 ? max_stacks : 256);
  struct pp_stack_table_limits lim = {
      .max_stacks = stacks,
      .max_string_bytes = 16u << 20,
      .max_frame_refs = stacks * 64 < (8u << 20) ? stacks * 64 : (8u << 20),
      .max_depth =
          st->max_depth + PY_EXTRA_FRAMES + 2 + (native ? PYN_MAX_NATIVE + PYN_MAX_KERNEL : 0),
  };
  st->stacks = pp_stack_table_new(&lim);
  /* + <GC> and task frames + [Truncated Stack] + <thread: name> */
  st->frames = malloc((st->max_depth + PY_EXTRA_FRAMES + 2) * sizeof(*st->frames));
  static const struct pp_target_ops ops = {.attach = python_attach, .release = python_release};
  struct pp_target_table_config tc = {.retry_attempts = PY_LOCATE_ATTEMPTS,
                                      .retry_first_ns = PY_LOCATE_RETRY_NS,
                                      .retry_max_ns = PY_LOCATE_RETRY_NS};
  st->targets = pp_target_table_new(host, &ops, st, &tc);
  if (st->blocking) { /* only blocking mode holds threads */
    st->pre_tids = calloc(PY_MAX_FREEZE, sizeof(*st->pre_tids));
    st->pre_states = calloc(PY_MAX_FREEZE, 1);
  }
  if (!st->cc || !st->walker || !st->objs || !st->stacks || !st->frames || !st->targets ||
      (st->blocking && (!st->pre_tids || !st->pre_states))) {
    py_fini(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int py_start(void *state, struct pp_session *session) {
  struct py_state *st = state;
  const char *m = session->mode ? session->mode : "cpu";
  st->filter = strcmp(m, "wall") == 0        ? PY_ALL_THREADS
               : strcmp(m, "gil") == 0       ? PY_GIL_THREAD
               : strcmp(m, "exception") == 0 ? PY_EXCEPTION_THREADS
                                             : PY_RUNNING_THREADS;
  /* off-CPU stacks need every thread read: a blocked one is an off-CPU
   * sample, a running one a cpu (or wall) sample as before */
  st->offcpu = (session->flags & PP_SESSION_OFFCPU) &&
               (st->filter == PY_RUNNING_THREADS || st->filter == PY_ALL_THREADS);
  st->untagged = PY_UNTAGGED_ALL;
  if (st->offcpu && st->filter == PY_RUNNING_THREADS) {
    st->untagged = session->flags & PP_SESSION_NO_CPU ? PY_UNTAGGED_NONE : PY_UNTAGGED_RUNNING;
    st->filter = PY_ALL_THREADS;
  }
  /* gProfiler's eBPF sampler (and auto, which prefers it) has no
   * counterpart here: say what runs instead, once */
  if ((!strcmp(m, "pyperf") || !strcmp(m, "auto")) && !st->told_gprofiler_mode) {
    st->told_gprofiler_mode = true;
    PP_WARNING(st->host,
               "--python-mode %s: polyprof has no PyPerf; it reads Python stacks from outside "
               "the process (cpu mode, like gProfiler's py-spy), %s",
               m,
               st->native ? "with the native frames of per-thread perf samples (--python-native)"
                          : "with native frames under them only with --python-native");
  }
  if (st->native && (st->filter != PY_RUNNING_THREADS || st->offcpu || st->blocking)) {
    PP_ERROR(st->host,
             "python.native (--python-native) works in cpu mode only, without blocking and "
             "off-CPU profiles (mode is %s%s%s): turn it off or use --python-mode cpu",
             m, st->offcpu ? ", off-CPU asked" : "", st->blocking ? ", blocking" : "");
    return PP_PERMANENT(EINVAL);
  }
  if (st->frequency > 0) session->tick_interval_ns = 1000000000ull / (uint64_t)st->frequency;
  if (!session->tick_interval_ns) session->tick_interval_ns = 1000000000ull / 11;
  st->interval_ns = session->tick_interval_ns;
  /* at most a second and 16 ticks between two looks: each sample of a
   * process looked at that rarely stands for at most 16, which bounds how
   * much one look can weigh in a profile */
  uint64_t per_second = 1000000000ull / st->interval_ns;
  if (st->native) {
    python_native_start(st->native, per_second ? per_second : 1, session,
                        session->tick_interval_ns);
    /* the kernel takes the samples; a tick reads them and then each
     * thread's Python stack, which the sooner it is read, the likelier is
     * still the one the kernel saw */
    uint64_t read_ns = st->interval_ns / 10;
    read_ns = read_ns < PYN_READ_MIN_NS   ? PYN_READ_MIN_NS
              : read_ns > PYN_READ_MAX_NS ? PYN_READ_MAX_NS
                                          : read_ns;
    if (session->tick_interval_ns > read_ns) session->tick_interval_ns = read_ns;
  }
  st->max_asleep_span = per_second < 2 ? 2 : per_second > 16 ? 16 : (uint32_t)per_second;
  st->weight = 1;
  st->due_ns = 0;
  /* At kHz rates the default 50 us timer slack of the thread that calls
   * tick() (ours: start() runs on it) would eat a third of each interval. */
  if (session->tick_interval_ns < 2000000) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  PP_INFO(st->host, "sampling Python processes at %.0f Hz (mode %s%s%s%s%s)",
          1e9 / (double)st->interval_ns, m,
          st->filter == PY_RUNNING_THREADS && strcmp(m, "cpu") ? " = cpu" : "",
          st->offcpu ? ", blocked threads as off-CPU time" : "", st->blocking ? ", blocking" : "",
          st->native ? ", native frames" : "");
  return 0;
}

static int py_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct py_state *st = state;
  return pp_target_table_add(st->targets, tg, n);
}

static int py_dump(void *state, struct pp_sink *sink) {
  return python_dump(state, sink);
}

static int py_tick(void *state, uint64_t now) {
  return python_tick(state, now);
}

static int py_snapshot(void *state, struct pp_sink *sink) {
  struct py_state *st = state;
  const struct pp_host *h = st->host;
  pp_stack_table_emit(st->stacks, h, sink);
  uint64_t samples, failed, missed;
  /* before the table's report, which removes what exited */
  python_report_targets(st, sink, &samples, &failed, &missed);
  pp_target_table_report(st->targets, sink);
  uint64_t hits, misses, evictions;
  python_codecache_stats(st->cc, &hits, &misses, &evictions);
  h->add_counter(sink, "samples", samples);
  h->add_counter(sink, "failed_samples", failed);
  h->add_counter(sink, "missed_samples", missed);
  if (st->asleep_skips) h->add_counter(sink, "asleep_skips", st->asleep_skips);
  st->asleep_skips = 0;
  h->add_counter(sink, "code_cache_misses", misses);
  h->add_counter(sink, "code_cache_evictions", evictions);
  uint64_t async_passes, async_over;
  python_walker_async_counters(st->walker, &async_passes, &async_over);
  if (async_over) h->add_counter(sink, "async_tasks_over", async_over);
  if (st->native) python_native_report(st->native, sink);
  python_codecache_new_gen(st->cc);
  return 0;
}

static int py_stop(void *state) {
  (void)state;
  return 0;
}

static void py_fini(void *state) {
  struct py_state *st = state;
  if (!st) return;
  python_native_free(st->native);
  pp_target_table_free(st->targets); /* releases every target: needs the code cache */
  pp_cpu_switches_close(st->switches);
  python_codecache_free(st->cc);
  python_walker_free(st->walker);
  python_objreader_free(st->objs);
  pp_stack_table_free(st->stacks);
  free(st->frames);
  free(st->pre_tids);
  free(st->pre_states);
  free(st->released);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "python",
    .version = "0.1.0",
    .description =
        "CPython 2.7 and 3.6-3.13 stacks read from outside the process (3.14: "
        "from the 3.14 layout, tested on a synthetic image only)",
    /* PERFMON: the per-CPU context switch records of cpu mode and
     * python.native's per-thread events; SYSLOG: the names of
     * python.native's kernel frames (/proc/kallsyms) */
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE | PP_CAP_NEEDS_PERFMON |
                    PP_CAP_NEEDS_SYSLOG | PP_CAP_ARCH_X86_64 | PP_CAP_ARCH_AARCH64,
    .match_exe = exe_patterns,
    .match_maps = map_patterns,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = py_init,
    .start = py_start,
    .add_targets = py_add_targets,
    .tick = py_tick,
    .snapshot = py_snapshot,
    .stop = py_stop,
    .fini = py_fini,
    .dump = py_dump,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
