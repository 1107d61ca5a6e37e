/*
 * polyprof perf plugin: the system-wide base of every profile.
 *
 * Samples every CPU with perf_event_open (software cpu-clock by default),
 * reads the kernel's mmap ring buffers from tick(), symbolizes on the host
 * and aggregates per session. No perf binary, no perf.data file, no text
 * round-trip. See perf.h for the map of the parts.
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
#include <time.h>
#include <unistd.h>

#include <asm/perf_regs.h>

#include "perf.h"
#include "polyprof/kit/heap.h"
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
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const struct pp_option *opt(const char *key) {
  for (size_t i = 0; i < NOPTIONS; i++)
    if (strcmp(options[i].key, key) == 0) return &options[i];
  return NULL;
}

/* The host validated the values and applied defaults; a host that does not
 * know a key (an older agent, the test harness) gets the declared default. */
static int64_t cfg_int(const struct pp_host *h, const char *key) {
  int64_t v;
  if (h->config_int(h, key, &v) == 0) return v;
  const struct pp_option *o = opt(key);
  return o && o->default_value ? strtoll(o->default_value, NULL, 10) : 0;
}

static int cfg_bool(const struct pp_host *h, const char *key) {
  int v;
  if (h->config_bool(h, key, &v) == 0) return v;
  const struct pp_option *o = opt(key);
  return o && o->default_value && strcmp(o->default_value, "true") == 0;
}

static const char *cfg_str(const struct pp_host *h, const char *key) {
  const char *v = NULL;
  if (h->config_string(h, key, &v) == 0 && v) return v;
  const struct pp_option *o = opt(key);
  return o ? o->default_value : NULL;
}

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
  st->mode = parse_mode(cfg_str(host, "mode"));
  st->stack_size = (uint32_t)cfg_int(host, "dwarf_stack_size") & ~7u;
  snprintf(st->event, sizeof(st->event), "%s",
           cfg_str(host, "event") ? cfg_str(host, "event") : "");
  st->data_pages = (uint32_t)cfg_int(host, "mmap_pages");
  st->event_period = (uint64_t)cfg_int(host, "event_period");
  st->kernel = cfg_bool(host, "kernel");
  st->max_depth = (uint32_t)cfg_int(host, "max_stack_depth");
  st->perfmap_max_bytes = (size_t)cfg_int(host, "perfmap_max_mb") << 20;

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
        host->log(host, PP_LOG_ERROR, "perf.pids: '%s' is not a pid", items[i]);
        free(st->pids);
        free(st);
        return -EINVAL;
      }
      st->pids[st->npids++] = (uint32_t)v;
    }
  }
  perf_procs_init(&st->procs, (size_t)cfg_int(host, "max_processes"),
                  (size_t)cfg_int(host, "max_maps"));
  perf_dsos_init(&st->dsos, (size_t)cfg_int(host, "symbol_cache_mb") << 20,
                 cfg_bool(host, "debug_files"));
  st->dsos.host = host;
  perf_frames_init(&st->frames, (size_t)cfg_int(host, "max_frames"));
  size_t max_stacks = (size_t)cfg_int(host, "max_stacks");
  perf_stacks_init(&st->fp, max_stacks);
  perf_stacks_init(&st->dwarf, max_stacks);
  st->self_pid = (uint32_t)getpid();
  *out = st;
  return 0;
}

static bool pid_wanted(const struct perf_state *st, uint32_t pid) {
  if (!st->npids) return true;
  for (size_t i = 0; i < st->npids; i++)
    if (st->pids[i] == pid) return true;
  return false;
}

/* ---- records ---- */

struct sample_view {
  uint32_t pid, tid;
  const uint64_t *chain;
  uint64_t nchain;
  uint64_t abi;
  const uint64_t *regs;
  unsigned nregs;
  const uint8_t *stack;
  uint64_t stack_len;
};

/* Parses a SAMPLE record against our sample_type; 0 or -1 if it does not
 * fit its own size. */
static int parse_sample(const struct perf_state *st, const uint8_t *rec, size_t size,
                        struct sample_view *v) {
  size_t off = sizeof(struct perf_event_header);
  memset(v, 0, sizeof(*v));
#define NEED(n)                      \
  do {                               \
    if ((n) > size - off) return -1; \
  } while (0)
  NEED(24);
  uint32_t pt[2];
  memcpy(pt, rec + off + 8, 8);
  v->pid = pt[0];
  v->tid = pt[1];
  off += 24; /* ip, pid/tid, time */
  NEED(8);
  memcpy(&v->nchain, rec + off, 8);
  off += 8;
  if (v->nchain > (size - off) / 8) return -1;
  v->chain = (const uint64_t *)(rec + off); /* records are 8-byte aligned */
  off += v->nchain * 8;
  if (st->ev.sample_type & PERF_SAMPLE_REGS_USER) {
    NEED(8);
    memcpy(&v->abi, rec + off, 8);
    off += 8;
    if (v->abi) {
      unsigned nregs = (unsigned)__builtin_popcountll(st->ev.regs_mask);
      NEED((size_t)nregs * 8);
      v->regs = (const uint64_t *)(rec + off);
      v->nregs = nregs;
      off += (size_t)nregs * 8;
    }
  }
  if (st->ev.sample_type & PERF_SAMPLE_STACK_USER) {
    NEED(8);
    uint64_t ssize;
    memcpy(&ssize, rec + off, 8);
    off += 8;
    if (ssize) {
      if (ssize > size - off) return -1;
      const uint8_t *data = rec + off;
      off += ssize;
      NEED(8);
      uint64_t dyn;
      memcpy(&dyn, rec + off, 8);
      v->stack = data;
      v->stack_len = dyn < ssize ? dyn : ssize;
    }
  }
#undef NEED
  return 0;
}

/* The user instruction pointer among the sampled registers. */
static uint64_t user_ip(const struct perf_state *st, const uint64_t *regs, unsigned nregs) {
  unsigned k = 0;
  for (int bit = 0; bit < 64 && k < nregs; bit++) {
    if (!(st->ev.regs_mask & (1ull << bit))) continue;
    if (bit == PERF_REG_X86_IP) return regs[k];
    k++;
  }
  return 0;
}

static void handle_sample(struct perf_state *st, const uint8_t *rec, size_t size) {
  struct sample_view v;
  if (parse_sample(st, rec, size, &v) < 0) {
    st->ev.malformed++;
    return;
  }
  if (!pid_wanted(st, v.pid)) {
    st->filtered++;
    return;
  }
  st->samples++;
  const char *comm = perf_thread_comm(st, v.pid, v.tid);
  struct perf_proc *p = perf_proc_get(st, v.pid, true);
  if (!p) return;
  p->sampled = true;
  p->last_used = st->tick;

  uint32_t kframes[PERF_MAX_FRAMES], ufp[PERF_MAX_FRAMES], fr[PERF_MAX_FRAMES];
  uint32_t nk = 0, nufp = 0;
  uint64_t uips[PERF_MAX_FRAMES];
  int nuips = 0;
  uint64_t ctx = 0;
  bool uleaf = true, maps_ok = false, maps_tried = false;
  for (uint64_t i = 0; i < v.nchain; i++) {
    uint64_t ip = v.chain[i];
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      ctx = ip;
      continue;
    }
    if (ctx == (uint64_t)PERF_CONTEXT_KERNEL) {
      if (nk < PERF_MAX_FRAMES) kframes[nk++] = perf_sym_kernel(st, ip); /* as perf: no -1 */
    } else if (ctx == (uint64_t)PERF_CONTEXT_USER) {
      if (!maps_tried) {
        maps_ok = perf_proc_need_maps(st, p) == 0;
        maps_tried = true;
      }
      if (nufp < PERF_MAX_FRAMES)
        ufp[nufp++] = maps_ok ? perf_sym_user(st, p, ip, uleaf) : PERF_FRAME_ID_UNKNOWN;
      uleaf = false;
    }
  }
  if (st->mode != PERF_MODE_DWARF) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < nk && n < PERF_MAX_FRAMES; i++)
      fr[n++] = kframes[i];
    for (uint32_t i = 0; i < nufp && n < PERF_MAX_FRAMES; i++)
      fr[n++] = ufp[i];
    if (n == 0) fr[n++] = PERF_FRAME_ID_UNKNOWN;
    perf_stacks_add(&st->fp, v.pid, comm, fr, n);
  }
  if (st->mode != PERF_MODE_FP) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < nk && n < PERF_MAX_FRAMES; i++)
      fr[n++] = kframes[i];
    if (v.abi && v.regs && v.stack_len && v.pid != 0) {
      if (!maps_tried) maps_ok = perf_proc_need_maps(st, p) == 0;
      if (maps_ok) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        nuips = perf_unwind_user(st, p, v.regs, v.nregs, v.stack, v.stack_len, uips,
                                 (int)st->max_depth);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        st->unwind_ns +=
            (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
        for (int i = 0; i < nuips && n < PERF_MAX_FRAMES; i++)
          fr[n++] = perf_sym_user(st, p, uips[i], i == 0);
      }
    } else if (v.abi && v.regs && v.pid != 0 && n < PERF_MAX_FRAMES) {
      /* registers without a stack copy: the user leaf is still known */
      if (!maps_tried) maps_ok = perf_proc_need_maps(st, p) == 0;
      if (maps_ok) fr[n++] = perf_sym_user(st, p, user_ip(st, v.regs, v.nregs), true);
    }
    if (n == 0) fr[n++] = PERF_FRAME_ID_UNKNOWN;
    perf_stacks_add(&st->dwarf, v.pid, comm, fr, n);
  }
}

/* Strings in records are NUL-terminated within the record; never trust it. */
static const char *rec_str(const uint8_t *rec, size_t off, size_t size, size_t trailer, char *buf,
                           size_t cap) {
  if (off + trailer >= size) return NULL;
  size_t avail = size - off - trailer;
  size_t n = strnlen((const char *)rec + off, avail);
  if (n >= cap) n = cap - 1;
  memcpy(buf, rec + off, n);
  buf[n] = '\0';
  return buf;
}

#define TRAILER 16 /* sample_id_all: pid/tid + time */

/* Task records with pid 0: the idle task never forks, execs or maps, so a
 * 0 is the kernel's name for a task outside the agent's pid namespace
 * (an agent run in a container or under unshare). Their mappings and names
 * must not pile up on pid 0, whose samples are kernel-only for us. */

static void on_record(void *arg, const struct perf_event_header *h, const uint8_t *rec) {
  struct perf_state *st = arg;
  size_t size = h->size;
  const size_t hs = sizeof(*h);
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      handle_sample(st, rec, size);
      break;
    case PERF_RECORD_MMAP2: {
      if (size < hs + 64 + TRAILER) break;
      uint32_t pt[2];
      uint64_t addr, len, pgoff, ino;
      uint32_t maj, min, prot;
      memcpy(pt, rec + hs, 8);
      memcpy(&addr, rec + hs + 8, 8);
      memcpy(&len, rec + hs + 16, 8);
      memcpy(&pgoff, rec + hs + 24, 8);
      memcpy(&maj, rec + hs + 32, 4);
      memcpy(&min, rec + hs + 36, 4);
      memcpy(&ino, rec + hs + 40, 8);
      memcpy(&prot, rec + hs + 56, 4);
      if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) maj = min = 0, ino = 0;
      char path[4096];
      if (!rec_str(rec, hs + 64, size, TRAILER, path, sizeof(path))) break;
      if (pt[0] == 0) break; /* task outside our pid namespace */
      perf_proc_on_mmap2(st, pt[0], addr, len, pgoff, maj, min, ino, prot, path);
      break;
    }
    case PERF_RECORD_COMM: {
      if (size < hs + 8 + TRAILER) break;
      uint32_t pt[2];
      memcpy(pt, rec + hs, 8);
      char comm[PERF_COMM_LEN];
      if (!rec_str(rec, hs + 8, size, TRAILER, comm, sizeof(comm))) break;
      if (pt[0] == 0) break; /* task outside our pid namespace */
      perf_proc_on_comm(st, pt[0], pt[1], comm, (h->misc & PERF_RECORD_MISC_COMM_EXEC) != 0);
      break;
    }
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT: {
      if (size < hs + 16) break;
      uint32_t v[4]; /* pid, ppid, tid, ptid */
      memcpy(v, rec + hs, 16);
      if (v[0] == 0) break; /* task outside our pid namespace */
      if (h->type == PERF_RECORD_FORK)
        perf_proc_on_fork(st, v[0], v[1], v[2], v[3]);
      else
        perf_proc_on_exit(st, v[0], v[2]);
      break;
    }
    case PERF_RECORD_LOST: {
      if (size < hs + 16) break;
      uint64_t lost;
      memcpy(&lost, rec + hs + 8, 8);
      st->lost += lost;
      break;
    }
    case PERF_RECORD_LOST_SAMPLES: {
      if (size < hs + 8) break;
      uint64_t lost;
      memcpy(&lost, rec + hs, 8);
      st->lost += lost;
      break;
    }
    case PERF_RECORD_THROTTLE:
      st->throttled++;
      break;
    case PERF_RECORD_UNTHROTTLE:
      st->unthrottled++;
      break;
    default:
      break;
  }
}

static void drain(struct perf_state *st) {
  st->dsos.clock = ++st->tick;
  perf_events_drain(&st->ev, on_record, st);
  perf_procs_reap(st, false);
  perf_dsos_trim(&st->dsos);
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

static int perf_start(void *state, struct pp_session *session) {
  struct perf_state *st = state;
  if (session->mode) st->mode = parse_mode(session->mode);
  uint32_t freq = session->frequency_hz ? session->frequency_hz : 11;
  /* stack copies make every sample ~stack_size bytes: gProfiler caps
   * dwarf/smart at 100 Hz for the same reason */
  if (st->mode != PERF_MODE_FP && freq > 100) {
    PERF_LOG(st, PP_LOG_INFO, "%s mode: frequency capped at 100 Hz (asked %u)", mode_name(st->mode),
             freq);
    freq = 100;
  }
  uint32_t maxrate = max_sample_rate();
  if (maxrate && freq > maxrate) {
    PERF_LOG(st, PP_LOG_WARNING,
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
      PERF_LOG(st, PP_LOG_INFO, "system-wide events refused (%s); sampling the threads of pids",
               strerror(-rc));
      rc = perf_events_open_tasks(&st->ev, &cfg, err, sizeof(err));
    }
  }
  if (rc < 0) {
    PERF_LOG(st, PP_LOG_ERROR, "perf disabled: %s; continuing perf-less", err);
    return refusal_is_permanent(-rc) ? PP_PERMANENT(-rc) : rc;
  }
  if (st->ev.kernel_refused)
    PERF_LOG(st, PP_LOG_WARNING,
             "kernel frames off: the kernel allows this user to sample user space only "
             "(kernel.perf_event_paranoid=2 without CAP_PERFMON)");
  /* Kernel symbols are loaded before sampling starts: the first drain
   * would otherwise spend ~100 ms on /proc/kallsyms while the rings fill. */
  if (st->kernel && !st->ev.kernel_refused) perf_sym_kernel(st, 0);
  perf_events_enable(&st->ev);
  st->running = true;
  session->tick_interval_ns = (uint64_t)cfg_int(st->host, "drain_interval_ms") * 1000000ull;
  char rate[48];
  if (st->event_period)
    snprintf(rate, sizeof(rate), "every %llu events", (unsigned long long)st->event_period);
  else
    snprintf(rate, sizeof(rate), "at %u Hz", freq);
  PERF_LOG(st, PP_LOG_INFO, "sampling %d CPUs%s with %s %s, mode %s%s, %u KiB ring per CPU",
           st->ev.nrings, st->ev.per_task ? " (threads of the given pids only)" : "",
           st->ev.event_name, rate, mode_name(st->mode),
           st->mode != PERF_MODE_FP ? " (user stack copies)" : "",
           (unsigned)(p2 * (uint64_t)sysconf(_SC_PAGESIZE) / 1024));
  return 0;
}

static int perf_add_targets(void *state, const struct pp_target *t, size_t n) {
  return 0; /* system-wide: every process is sampled */
}

static int perf_tick(void *state, uint64_t now_ns) {
  struct perf_state *st = state;
  if (st->running) drain(st);
  return 0;
}

static int perf_snapshot(void *state, struct pp_sink *sink) {
  struct perf_state *st = state;
  const struct pp_host *h = st->host;
  if (st->running) drain(st);
  perf_stacks_emit(st, sink);

  /* Go processes: their version, as gProfiler's app metadata has it */
  struct perf_idmap *pm = &st->procs.procs;
  for (size_t i = 0; i < pm->cap; i++) {
    struct perf_proc *p = pm->slots[i].val;
    if (!p || !p->sampled) continue;
    if (p->go_version[0]) {
      char json[160];
      snprintf(json, sizeof(json), "{\"golang_version\": \"%s\", \"link\": \"%s\"}", p->go_version,
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
    PERF_LOG(st, PP_LOG_WARNING,
             "session: %llu samples, %llu lost (ring buffer full: raise perf.mmap_pages or "
             "lower the frequency), %llu throttle events (kernel.perf_cpu_time_max_percent)",
             (unsigned long long)st->samples, (unsigned long long)st->lost,
             (unsigned long long)st->throttled);
  PERF_LOG(st, PP_LOG_DEBUG,
           "session: %llu samples, %zu stacks, %zu frames, %zu processes, %zu objects, "
           "tables of %zu objects, %zu KiB (%llu loaded, %llu dropped with their last process)",
           (unsigned long long)st->samples, nstacks, nframes, st->procs.procs.n, st->dsos.map.n,
           perf_dsos_with_tables(&st->dsos), st->dsos.bytes / 1024,
           (unsigned long long)st->dsos.loads, (unsigned long long)st->dsos.dropped);
  if (dropped || st->frames.dropped)
    PERF_LOG(st, PP_LOG_WARNING,
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
  perf_unwind_fini(st->unwind);
  free(st->pids);
  free(st);
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
    .option_count = NOPTIONS,
    .init = perf_init,
    .start = perf_start,
    .add_targets = perf_add_targets,
    .tick = perf_tick,
    .snapshot = perf_snapshot,
    .stop = perf_stop,
    .fini = perf_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
