/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof perf plugin: the system-wide base of every profile.
 *
 * Samples every CPU with perf_event_open (software cpu-clock by default),
 * reads the kernel's mmap ring buffers from tick(), symbolizes on the host
 * and aggregates per session. No perf binary, no perf.data file, no text
 * round-trip. This file holds the descriptor, the options and the vtable;
 * perf.h maps the other parts.
 *
 * Modes (--perf-mode): fp (kernel-collected frame-pointer callchains),
 * dwarf (user stack copies unwound with libunwind), smart (both from the
 * same samples; per process the deeper one).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"
#include "polyprof/kit/heap.h"
#include "polyprof/kit/json.h"
#include "polyprof/kit/options.h"
#include "polyprof/kit/proc.h"

static const char *const mode_choices[] = {"fp", "dwarf", "smart", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "fp",
     .choices = mode_choices,
     .help = "fp: frame-pointer callchains; dwarf: unwind user stack copies with DWARF CFI; "
             "smart: both, per process the deeper one"},
    {.key = "dwarf_stack_size",
     .type = PP_OPT_INT,
     .cli_flag = "perf-dwarf-stack-size",
     .default_value = "8192",
     .min = 64,
     .max = 65528,
     .help = "bytes of user stack copied per sample in dwarf/smart mode"},
    {.key = "event",
     .type = PP_OPT_STRING,
     .cli_flag = "perf-event",
     .default_value = "cpu-clock",
     .help = "sampling event: cpu-clock (software, everywhere), task-clock, or a hardware event "
             "(cycles, instructions, cache-misses...) where the machine has a PMU"},
    {.key = "event_period",
     .type = PP_OPT_INT,
     .cli_flag = "perf-event-period",
     .default_value = "0",
     .min = 0,
     .max = INT64_MAX,
     .help = "sample every N events of --perf-event instead of at the session frequency; 0: "
             "frequency"},
    {.key = "memory_restart",
     .type = PP_OPT_BOOL,
     .cli_flag = "perf-no-memory-restart",
     .default_value = "true",
     .help = "accepted for gProfiler compatibility; polyprof's perf caches are bounded, so "
             "there is no perf process to restart"},
    {.key = "mmap_pages",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 16384,
     .help = "ring buffer data pages per CPU (power of two); 0: 128 for fp, 256 for dwarf/smart"},
    {.key = "pids",
     .type = PP_OPT_LIST,
     .default_value = NULL,
     .help = "only keep samples of these processes (host pids); empty: every process"},
    {.key = "follow_children",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "with pids: keep the samples of every process they start too, however deep "
             "(set by polyprof run, and attach --subprocesses)"},
    {.key = "kernel",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "include kernel frames (_[k])"},
    {.key = "max_stack_depth",
     .type = PP_OPT_INT,
     .default_value = "127",
     .min = 8,
     .max = 1024,
     .help = "frames per callchain the kernel collects (sample_max_stack)"},
    {.key = "symbol_cache_mb",
     .type = PP_OPT_INT,
     .default_value = "96",
     .min = 4,
     .max = 65536,
     .help = "memory for symbol and unwind tables of mapped files (LRU)"},
    {.key = "max_processes",
     .type = PP_OPT_INT,
     .default_value = "8192",
     .min = 16,
     .max = 1 << 22,
     .help = "processes whose mappings are tracked at once"},
    {.key = "max_maps",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 16,
     .max = 1 << 22,
     .help = "executable mappings tracked per process"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "262144",
     .min = 64,
     .max = 1 << 26,
     .help = "distinct stacks per session; more are counted as dropped"},
    {.key = "max_frames",
     .type = PP_OPT_INT,
     .default_value = "262144",
     .min = 64,
     .max = 1 << 26,
     .help = "distinct frames per session"},
    {.key = "perfmap_max_mb",
     .type = PP_OPT_INT,
     .default_value = "64",
     .min = 1,
     .max = 4096,
     .help = "largest /tmp/perf-PID.map read for JIT symbols"},
    {.key = "debug_files",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "look for separate debug files (/usr/lib/debug, build-id, .gnu_debuglink)"},
    {.key = "drain_interval_ms",
     .type = PP_OPT_INT,
     .default_value = "100",
     .min = 10,
     .max = 5000,
     .help = "how often the ring buffers are read"},
    {.key = "offcpu_threshold",
     .type = PP_OPT_INT,
     .cli_flag = "offcpu-threshold",
     .default_value = "100",
     .min = 0,
     .max = 60000000,
     .help = "--mode offcpu: shortest blocked time recorded, microseconds"},
    {.key = "offcpu_max_threads",
     .type = PP_OPT_INT,
     .default_value = "4096",
     .min = 64,
     .max = 1048576,
     .help = "--mode offcpu: threads tracked while blocked at once (more are counted as "
             "offcpu_table_full)"},
    {.key = "offcpu_mmap_pages",
     .type = PP_OPT_INT,
     .default_value = "256",
     .min = 8,
     .max = 65536,
     .help = "--mode offcpu: ring buffer pages per CPU for context switches (rounded up to a "
             "power of two)"},
    {.key = "native_alloc",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "set by the agent for --mode alloc with --pids: the worker may raise "
             "CAP_SYS_ADMIN, which uprobe events need, around opening them"},
    {.key = "alloc_period",
     .type = PP_OPT_INT,
     .cli_flag = "perf-alloc-period",
     .default_value = "1000",
     .min = 1,
     .max = 1 << 30,
     .help = "--mode alloc (native, --pids only): one sample every N calls of an allocation "
             "function on average (each thread's period moves within N/2..3N/2), counted as its "
             "size times its period"},
    {.key = "alloc_duty",
     .type = PP_OPT_INT,
     .cli_flag = "perf-alloc-duty",
     .default_value = "20",
     .min = 1,
     .max = 100,
     .help = "--mode alloc (native): percent of every second the probes are in place (every "
             "call of a probed function traps while they are); the bytes seen are scaled up to "
             "the whole session"},
    {.key = "alloc_max_threads",
     .type = PP_OPT_INT,
     .default_value = "256",
     .min = 1,
     .max = 65536,
     .help = "--mode alloc (native): threads probed at once (more are counted as "
             "alloc_threads_refused)"},
    {.key = "alloc_mmap_pages",
     .type = PP_OPT_INT,
     .default_value = "8",
     .min = 1,
     .max = 1024,
     .help = "--mode alloc (native): ring buffer pages per probed thread (rounded up to a power "
             "of two)"},
};
#define OPT_INT(h, key) pp_opt_int((h), PP_OPTIONS(options), (key))
#define OPT_BOOL(h, key) pp_opt_bool((h), PP_OPTIONS(options), (key))
#define OPT_STR(h, key) pp_opt_string((h), PP_OPTIONS(options), (key))

static int parse_mode(const char *m) {
  if (m && strcmp(m, "dwarf") == 0) return PERF_MODE_DWARF;
  if (m && strcmp(m, "smart") == 0) return PERF_MODE_SMART;
  return PERF_MODE_FP;
}

static const char *mode_name(int m) {
  return m == PERF_MODE_DWARF ? "dwarf" : m == PERF_MODE_SMART ? "smart" : "fp";
}

static int perf_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, proc_root)) return -ENOTSUP;
  struct perf_state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->mode = parse_mode(OPT_STR(host, "mode"));
  st->stack_size = (uint32_t)OPT_INT(host, "dwarf_stack_size") & ~7u;
  snprintf(st->event, sizeof(st->event), "%s",
           OPT_STR(host, "event") ? OPT_STR(host, "event") : "");
  st->data_pages = (uint32_t)OPT_INT(host, "mmap_pages");
  st->event_period = (uint64_t)OPT_INT(host, "event_period");
  st->kernel = OPT_BOOL(host, "kernel");
  st->max_depth = (uint32_t)OPT_INT(host, "max_stack_depth");
  st->perfmap_max_bytes = (size_t)OPT_INT(host, "perfmap_max_mb") << 20;
  st->offcpu_threshold_us = (uint64_t)OPT_INT(host, "offcpu_threshold");
  st->offcpu_max_threads = (size_t)OPT_INT(host, "offcpu_max_threads");
  st->offcpu_pages = (uint32_t)OPT_INT(host, "offcpu_mmap_pages");
  st->alloc_period = (uint64_t)OPT_INT(host, "alloc_period");
  st->alloc_duty = (uint32_t)OPT_INT(host, "alloc_duty");
  st->alloc_max_threads = (size_t)OPT_INT(host, "alloc_max_threads");
  st->alloc_pages = 1;
  while (st->alloc_pages < (uint32_t)OPT_INT(host, "alloc_mmap_pages"))
    st->alloc_pages <<= 1;

  const char *const *items = NULL;
  size_t n = 0;
  if (host->config_list(host, "pids", &items, &n) == 0 && n > 0) {
    st->pids = calloc(n, sizeof(*st->pids));
    if (!st->pids) {
      free(st);
      return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
      char *end;
      unsigned long v = strtoul(items[i], &end, 10);
      if (end == items[i] || *end || v == 0 || v > UINT32_MAX) {
        PP_ERROR(host, "perf.pids: '%s' is not a pid", items[i]);
        free(st->pids);
        free(st);
        return -EINVAL;
      }
      st->pids[st->npids++] = (uint32_t)v;
    }
  }
  if (perf_follow_init(st, OPT_BOOL(host, "follow_children")) < 0) {
    free(st->pids);
    free(st);
    return -ENOMEM;
  }
  perf_procs_init(&st->procs, (size_t)OPT_INT(host, "max_processes"),
                  (size_t)OPT_INT(host, "max_maps"));
  perf_dsos_init(&st->dsos, (size_t)OPT_INT(host, "symbol_cache_mb") << 20,
                 OPT_BOOL(host, "debug_files"));
  st->dsos.host = host;
  perf_frames_init(&st->frames, (size_t)OPT_INT(host, "max_frames"));
  size_t max_stacks = (size_t)OPT_INT(host, "max_stacks");
  perf_stacks_init(&st->fp, max_stacks);
  perf_stacks_init(&st->dwarf, max_stacks);
  st->self_pid = (uint32_t)getpid();
  *out = st;
  return 0;
}

/* ---- vtable ---- */

static uint32_t max_sample_rate(void) {
  char buf[32];
  if (pp_read_file("/proc/sys/kernel/perf_event_max_sample_rate", buf, sizeof(buf), NULL) < 0)
    return 0;
  return (uint32_t)strtoul(buf, NULL, 10);
}

/* The kernel's or the configuration's answer, which a restart of the worker
 * would only repeat: the paranoid level or a missing capability (EACCES,
 * EPERM), an event this machine lacks (ENOENT, ENODEV, EOPNOTSUPP), no
 * perf_event_open at all (ENOSYS), an unknown event name or attributes the
 * kernel rejects (EINVAL). Out of file descriptors or memory may pass. */
static bool refusal_is_permanent(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
    case ENOSYS:
    case EINVAL:
      return true;
    default:
      return false;
  }
}

/* A failure here costs the off-CPU profile only: the cpu one goes on. */
static void start_offcpu(struct perf_state *st) {
  char err[512];
  if (!st->offcpu.slots &&
      perf_offcpu_init(&st->offcpu, st->offcpu_max_threads, st->offcpu_threshold_us) < 0) {
    PP_ERROR(st->host, "off-CPU profile disabled: out of memory for its tables");
    return;
  }
  uint32_t p2 = 1;
  while (p2 < st->offcpu_pages)
    p2 <<= 1;
  if (perf_offcpu_open(&st->offcpu, p2, (uint16_t)st->max_depth, err, sizeof(err)) < 0) {
    PP_ERROR(st->host, "off-CPU profile disabled: %s; the other profile types go on", err);
    return;
  }
  st->offcpu_on = true;
  PP_INFO(st->host,
          "off-CPU: context switches on %d CPUs, blocked %llu us or longer, up to %zu blocked "
          "threads, %u KiB ring per CPU",
          st->offcpu.ev.nrings, (unsigned long long)st->offcpu_threshold_us, st->offcpu_max_threads,
          (unsigned)(p2 * (uint64_t)sysconf(_SC_PAGESIZE) / 1024));
}

/* Native allocations of the given pids; a failure costs that profile only. */
static void start_alloc(struct perf_state *st) {
  char err[512];
  /* the agent says when it takes native allocations from this plugin (and
   * gives the worker the privilege uprobes need); host-wide is refused */
  if (!st->npids || !OPT_BOOL(st->host, "native_alloc")) return;
  if (perf_alloc_open(st, err, sizeof(err)) < 0) {
    PP_WARNING(st->host,
               "--mode alloc: perf cannot give native allocations (%s); the other "
               "types go on",
               err);
    return;
  }
  st->alloc_on = true;
  PP_INFO(st->host,
          "native alloc: uprobes on the allocator of %zu pids, %u %% of every second, a sample "
          "every %llu calls, up to %zu threads",
          st->npids, st->alloc_duty, (unsigned long long)st->alloc_period, st->alloc_max_threads);
  perf_alloc_tick(st);
}

static int perf_start(void *state, struct pp_session *session) {
  struct perf_state *st = state;
  if (session->mode) st->mode = parse_mode(session->mode);
  uint32_t freq = session->frequency_hz ? session->frequency_hz : 11;
  /* stack copies make every sample ~stack_size bytes: gProfiler caps
   * dwarf/smart at 100 Hz for the same reason */
  if (st->mode != PERF_MODE_FP && freq > 100) {
    PP_INFO(st->host, "%s mode: frequency capped at 100 Hz (asked %u)", mode_name(st->mode), freq);
    freq = 100;
  }
  uint32_t maxrate = max_sample_rate();
  if (maxrate && freq > maxrate) {
    PP_WARNING(st->host,
               "frequency %u Hz is above kernel.perf_event_max_sample_rate=%u; using %u Hz", freq,
               maxrate, maxrate);
    freq = maxrate;
  }
  uint32_t pages = st->data_pages ? st->data_pages : (st->mode == PERF_MODE_FP ? 128 : 256);
  uint32_t p2 = 1;
  while (p2 < pages)
    p2 <<= 1;
  struct perf_events_config cfg = {
      .event = st->event,
      .frequency = freq,
      .period = st->event_period,
      .user_callchain = st->mode != PERF_MODE_DWARF,
      .regs_and_stack = st->mode != PERF_MODE_FP,
      .stack_size = st->stack_size,
      .exclude_kernel = !st->kernel,
      .data_pages = p2,
      .max_stack = (uint16_t)st->max_depth,
  };
  if (st->mode != PERF_MODE_FP && !st->unwind && perf_unwind_init(&st->unwind) < 0) return -ENOMEM;
  /* the children started before now: per-task events open on them too */
  perf_follow_scan(st);
  cfg.pids = st->pids;
  cfg.npids = st->npids;
  char err[512];
  int rc;
  /* With a pid list and no root (rootless mode), per-task events are all
   * the kernel allows; root samples system-wide and filters. */
  if (st->npids && geteuid() != 0) {
    rc = perf_events_open_tasks(&st->ev, &cfg, err, sizeof(err));
  } else {
    rc = perf_events_open(&st->ev, &cfg, err, sizeof(err));
    if ((rc == -EACCES || rc == -EPERM) && st->npids) {
      PP_INFO(st->host, "system-wide events refused (%s); sampling the threads of pids",
              strerror(-rc));
      rc = perf_events_open_tasks(&st->ev, &cfg, err, sizeof(err));
    }
  }
  if (rc < 0) {
    PP_ERROR(st->host, "perf disabled: %s; continuing perf-less", err);
    return refusal_is_permanent(-rc) ? PP_PERMANENT(-rc) : rc;
  }
  if (st->ev.kernel_refused)
    PP_WARNING(st->host,
               "kernel frames off: the kernel allows this user to sample user space only "
               "(kernel.perf_event_paranoid=2 without CAP_PERFMON)");
  /* Kernel symbols are loaded before sampling starts: the first drain
   * would otherwise spend ~100 ms on /proc/kallsyms while the rings fill. */
  if (st->kernel && !st->ev.kernel_refused) perf_sym_kernel(st, 0);
  perf_events_enable(&st->ev);
  perf_follow_scan(st); /* the ones forked before the events saw FORK records */
  st->running = true;
  /* profile types (ABI 1.3): a host before it sends no bits, meaning cpu */
  st->cpu_on = !(session->flags & PP_SESSION_NO_CPU);
  st->offcpu_on = false;
  if (session->flags & PP_SESSION_OFFCPU) start_offcpu(st);
  st->alloc_on = false;
  if (session->flags & PP_SESSION_ALLOC) start_alloc(st);
  session->tick_interval_ns = (uint64_t)OPT_INT(st->host, "drain_interval_ms") * 1000000ull;
  char rate[48];
  if (st->event_period)
    snprintf(rate, sizeof(rate), "every %llu events", (unsigned long long)st->event_period);
  else
    snprintf(rate, sizeof(rate), "at %u Hz", freq);
  PP_INFO(st->host, "sampling %d CPUs%s with %s %s, mode %s%s, %u KiB ring per CPU", st->ev.nrings,
          st->ev.per_task ? " (threads of the given pids only)" : "", st->ev.event_name, rate,
          mode_name(st->mode), st->mode != PERF_MODE_FP ? " (user stack copies)" : "",
          (unsigned)(p2 * (uint64_t)sysconf(_SC_PAGESIZE) / 1024));
  return 0;
}

static int perf_add_targets(void *state, const struct pp_target *t, size_t n) {
  return 0; /* system-wide: every process is sampled */
}

static int perf_tick(void *state, uint64_t now_ns) {
  struct perf_state *st = state;
  if (st->running) perf_drain(st);
  if (st->offcpu_on) perf_offcpu_drain(st);
  if (st->alloc_on) perf_alloc_tick(st);
  return 0;
}

static int perf_snapshot(void *state, struct pp_sink *sink) {
  struct perf_state *st = state;
  const struct pp_host *h = st->host;
  if (st->running) perf_drain(st);
  /* a session without the cpu type still samples it: its records keep the
   * process and mapping tables current for the off-CPU and alloc stacks */
  if (st->cpu_on) perf_stacks_emit(st, sink);
  if (st->offcpu_on) perf_offcpu_emit(st, sink);
  if (st->alloc_on) perf_alloc_emit(st, sink);

  /* Go processes: their version, as gProfiler's app metadata has it */
  struct perf_idmap *pm = &st->procs.procs;
  for (size_t i = 0; i < pm->cap; i++) {
    struct perf_proc *p = pm->slots[i].val;
    if (!p || !p->sampled) continue;
    if (p->go_version[0]) {
      /* the version string is the binary's: escaped */
      char ver[3 * sizeof(p->go_version) + 8], json[sizeof(ver) + 64];
      pp_json_string(ver, sizeof(ver), p->go_version);
      snprintf(json, sizeof(json), "{\"golang_version\": %s, \"link\": \"%s\"}", ver,
               p->go_static ? "static" : "dynamic");
      h->set_app_metadata(sink, p->pid, json);
    }
    p->sampled = false;
  }

  uint64_t dropped = st->fp.dropped + st->dwarf.dropped;
  size_t nstacks = st->fp.n + st->dwarf.n, nframes = st->frames.n;
  perf_stacks_reset(&st->fp);
  perf_stacks_reset(&st->dwarf);
  perf_frames_reset(&st->frames);
  /* Every sample is symbolized and emitted: the tables of files that only
   * exited processes mapped are needed no more. Dropping them here, not
   * when the LRU budget fills, keeps a host with process churn flat; a
   * file still mapped by a tracked process keeps its tables. */
  size_t before = st->dsos.bytes;
  perf_procs_reap(st, true);
  size_t freed = before - st->dsos.bytes;
  /* free() keeps the pages in the heap; hand them back now, whatever hosts
   * the plugin (the worker loop trims after every snapshot too; the
   * in-process harness of test_perf_exited_tables does not) */
  if (freed) pp_release_heap();

  h->add_counter(sink, "samples", st->samples);
  h->add_counter(sink, "lost_samples", st->lost);
  h->add_counter(sink, "throttled", st->throttled);
  h->add_counter(sink, "dropped_stacks", dropped);
  h->add_counter(sink, "dropped_frames", st->frames.dropped);
  h->add_counter(sink, "malformed_records", st->ev.malformed);
  h->add_counter(sink, "filtered_samples", st->filtered);
  h->add_counter(sink, "maps_errors", st->procs.maps_errors);
  h->add_counter(sink, "file_open_errors", st->dsos.open_errors);
  h->add_counter(sink, "symbol_evictions", st->dsos.evictions);
  h->add_counter(sink, "symbol_loads", st->dsos.loads);
  h->add_counter(sink, "symbol_tables_dropped", st->dsos.dropped);
  /* frames in precompiled .NET code: named from the image, or its path */
  h->add_counter(sink, "r2r_frames", st->r2r_frames);
  h->add_counter(sink, "r2r_unnamed_frames", st->r2r_unnamed);
  st->r2r_frames = st->r2r_unnamed = 0;
  /* gauges, after the drop above: what the worker holds into the next session */
  h->add_counter(sink, "symbol_tables", perf_dsos_with_tables(&st->dsos));
  h->add_counter(sink, "symbol_table_kb", st->dsos.bytes / 1024);
  if (st->mode != PERF_MODE_FP) {
    h->add_counter(sink, "unwind_errors", st->unwind_errors);
    h->add_counter(sink, "unwind_ns", st->unwind_ns);
  }
  st->total_samples += st->samples;
  st->total_lost += st->lost;
  if (st->lost || st->throttled)
    PP_WARNING(st->host,
               "session: %llu samples, %llu lost (ring buffer full: raise perf.mmap_pages or "
               "lower the frequency), %llu throttle events (kernel.perf_cpu_time_max_percent)",
               (unsigned long long)st->samples, (unsigned long long)st->lost,
               (unsigned long long)st->throttled);
  PP_DEBUG(st->host,
           "session: %llu samples, %zu stacks, %zu frames, %zu processes, %zu objects, "
           "tables of %zu objects, %zu KiB (%llu loaded, %llu dropped with their last process)",
           (unsigned long long)st->samples, nstacks, nframes, st->procs.procs.n, st->dsos.map.n,
           perf_dsos_with_tables(&st->dsos), st->dsos.bytes / 1024,
           (unsigned long long)st->dsos.loads, (unsigned long long)st->dsos.dropped);
  if (dropped || st->frames.dropped)
    PP_WARNING(st->host,
               "session tables full: %llu samples dropped (perf.max_stacks), %llu frames "
               "dropped (perf.max_frames)",
               (unsigned long long)dropped, (unsigned long long)st->frames.dropped);

  st->samples = st->lost = st->throttled = st->unthrottled = st->filtered = 0;
  st->unwind_errors = st->unwind_ns = 0;
  st->ev.malformed = 0;
  st->procs.maps_errors = st->dsos.open_errors = st->dsos.evictions = 0;
  st->dsos.loads = st->dsos.dropped = 0;
  return 0;
}

static int perf_stop(void *state) {
  struct perf_state *st = state;
  if (st->running) perf_events_close(&st->ev);
  st->running = false;
  perf_offcpu_close(&st->offcpu);
  st->offcpu_on = false;
  perf_alloc_close(st);
  st->alloc_on = false;
  return 0;
}

static void perf_fini(void *state) {
  struct perf_state *st = state;
  if (!st) return;
  perf_stop(st);
  perf_procs_fini(st);
  perf_dsos_fini(&st->dsos);
  pp_kallsyms_free(st->kallsyms);
  perf_frames_fini(&st->frames);
  perf_stacks_fini(&st->fp);
  perf_stacks_fini(&st->dwarf);
  perf_offcpu_fini(&st->offcpu);
  perf_unwind_fini(st->unwind);
  free(st->pids);
  free(st->pids_given);
  free(st);
}

static int perf_dump_now(void *state, struct pp_sink *sink) {
  return perf_dump(state, sink);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "perf",
    .version = "1.0.0",
    .description = "system-wide native, kernel and JIT stacks from perf_event_open",
    .capabilities = PP_CAP_SYSTEM_WIDE | PP_CAP_NEEDS_PERFMON | PP_CAP_NEEDS_PTRACE |
                    PP_CAP_NEEDS_SYSLOG | PP_CAP_ARCH_X86_64,
    .match_exe = NULL,
    .match_maps = NULL,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = perf_init,
    .start = perf_start,
    .add_targets = perf_add_targets,
    .tick = perf_tick,
    .snapshot = perf_snapshot,
    .stop = perf_stop,
    .fini = perf_fini,
    .dump = perf_dump_now,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
