/*
 * polyprof php plugin: PHP call stacks read from outside the process, the
 * way phpspy does (process_vm_readv of executor_globals and the
 * zend_execute_data chain), without stopping the target.
 *
 * Each tick walks every target once (the session frequency); identical
 * stacks are aggregated and handed over at snapshot. Frames carry
 * "Class::function", the file and the executing line; the core writes them
 * as gProfiler does: "<name> <file>:<line>_[php]".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "php.h"

struct target {
  uint32_t pid;
  uint64_t start_time;
  int status; /* PP_PID_OK, or SKIPPED/ERROR with reason */
  bool gone;
  bool reported; /* the skip reason was logged once */
  struct php_attach at;
  char comm[16];
  char reason[200];
};

struct state {
  const struct pp_host *host;
  const char *proc_filter; /* substring of comm or cmdline; NULL: every match */
  uint32_t max_depth;
  struct php_walker *walker;
  struct php_agg *agg;
  struct target *targets;
  size_t ntargets, targets_cap;
  uint64_t samples, idle, torn, truncated, dropped, gone, denied, filtered;
  unsigned reported_versions[16]; /* major*100+minor already logged at info */
  size_t nreported;
};

static const char *const mode_choices[] = {"phpspy", NULL};
/* the CLI, FPM (master and workers), CGI; mod_php via its library */
static const char *const match_exe[] = {"php", "php[0-9]*", "php-fpm*", "php-cgi*", NULL};
static const char *const match_maps[] = {"libphp*.so*", NULL};

static const struct pp_option options[] = {
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "disabled",
     .choices = mode_choices,
     .help = "PHP profiling: 'phpspy' (read stacks from outside the process) or 'disabled'"},
    {.key = "proc_filter",
     .type = PP_OPT_STRING,
     .cli_flag = "php-proc-filter",
     .default_value = NULL,
     .help = "only PHP processes whose comm or command line contains this text (phpspy -P); "
             "unset: php, php-fpm*, php-cgi* and processes mapping libphp*.so"},
    {.key = "max_depth",
     .type = PP_OPT_INT,
     .default_value = "128",
     .min = 1,
     .max = PHP_MAX_DEPTH_LIMIT,
     .help = "frames read per stack; deeper stacks keep their innermost frames"},
    {.key = "max_stacks",
     .type = PP_OPT_INT,
     .default_value = "16384",
     .min = 64,
     .max = 1 << 20,
     .help = "distinct stacks kept between snapshots; more are dropped and counted"},
    {.key = "arena_kib",
     .type = PP_OPT_INT,
     .default_value = "8192",
     .min = 64,
     .max = 1 << 20,
     .help = "memory for the text of those stacks (KiB)"},
    {.key = "function_cache",
     .type = PP_OPT_INT,
     .default_value = "4096",
     .min = 16,
     .max = 1 << 20,
     .help = "cached function names/files (entries, ~800 bytes each)"},
};

#define LOG(st, lvl, ...) (st)->host->log((st)->host, (lvl), __VA_ARGS__)

static void php_fini(void *state);

static int php_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  const char *filter = NULL;
  if (host->config_string(host, "proc_filter", &filter) == 0 && filter && filter[0])
    st->proc_filter = filter;
  int64_t depth = 128, stacks = 16384, arena = 8192, cache = 4096;
  host->config_int(host, "max_depth", &depth);
  host->config_int(host, "max_stacks", &stacks);
  host->config_int(host, "arena_kib", &arena);
  host->config_int(host, "function_cache", &cache);
  st->max_depth = (uint32_t)depth;
  st->walker = php_walker_new((size_t)cache, st->max_depth);
  st->agg = php_agg_new((size_t)stacks, (size_t)arena * 1024, st->max_depth);
  if (!st->walker || !st->agg) {
    php_fini(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

static int php_start(void *state, struct pp_session *session) {
  struct state *st = state;
  LOG(st, PP_LOG_INFO, "sampling PHP stacks at %u Hz%s%s", session->frequency_hz,
      st->proc_filter ? ", filter " : "", st->proc_filter ? st->proc_filter : "");
  return 0;
}

static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, buf, cap - 1);
  int e = errno;
  close(fd);
  if (n < 0) return -e;
  buf[n] = '\0';
  return n;
}

/* phpspy -P in gProfiler's fork: a substring of comm, then of the command
 * line (its NULs read as spaces). */
static bool filter_match(const char *filter, uint32_t pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%u/comm", pid);
  if (read_small(path, buf, sizeof(buf)) > 0 && strstr(buf, filter)) return true;
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  ssize_t n = read_small(path, buf, sizeof(buf));
  if (n <= 0) return false;
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == '\0') buf[i] = ' ';
  return strstr(buf, filter) != NULL;
}

/* Which PHP a process runs and whether this repository ever checked that
 * version's struct layout on a live process: once per version, at info for
 * a checked layout and at warning for one taken from the reference alone
 * (its stacks may be garbage). An FPM pool is many pids of one version. */
static void report_version(struct state *st, const struct target *t) {
  unsigned key = (unsigned)t->at.major * 100u + (unsigned)t->at.minor;
  for (size_t i = 0; i < st->nreported; i++)
    if (st->reported_versions[i] == key) return;
  if (st->nreported < sizeof(st->reported_versions) / sizeof(st->reported_versions[0]))
    st->reported_versions[st->nreported++] = key;
  if (t->at.layout->tested)
    LOG(st, PP_LOG_INFO, "pid %u: PHP %d.%d (%s): struct layout tested on a live PHP %d.%d process",
        t->pid, t->at.major, t->at.minor, t->at.module, t->at.major, t->at.minor);
  else
    LOG(st, PP_LOG_WARNING,
        "pid %u: PHP %d.%d (%s): struct layout UNTESTED (offsets from phpspy's headers, never "
        "checked on a live PHP %d.%d process); stacks may be wrong",
        t->pid, t->at.major, t->at.minor, t->at.module, t->at.major, t->at.minor);
}

static void attach(struct state *st, struct target *t) {
  char exe[4096];
  const char *base = "php*";
  if (st->host->proc_exe(st->host, t->pid, exe, sizeof(exe)) == 0) {
    const char *slash = strrchr(exe, '/');
    base = slash ? slash + 1 : exe;
  }
  if (st->host->proc_comm(st->host, t->pid, t->comm, sizeof(t->comm)) < 0) t->comm[0] = '\0';
  int rc = php_attach_process(t->pid, base, &t->at, t->reason, sizeof(t->reason));
  if (rc < 0) {
    t->status = rc == -ESRCH ? PP_PID_ERROR : PP_PID_SKIPPED;
    if (rc == -ESRCH) t->gone = true;
    LOG(st, PP_LOG_INFO, "pid %u: not profiling PHP: %s", t->pid, t->reason);
    return;
  }
  t->status = PP_PID_OK;
  report_version(st, t);
  LOG(st, PP_LOG_DEBUG, "pid %u: PHP %d.%d, executor_globals at 0x%llx in %s", t->pid, t->at.major,
      t->at.minor, (unsigned long long)t->at.eg_addr, t->at.module);
}

static int php_add_targets(void *state, const struct pp_target *tg, size_t n) {
  struct state *st = state;
  for (size_t i = 0; i < n; i++) {
    if (st->proc_filter && !filter_match(st->proc_filter, tg[i].pid)) {
      st->filtered++;
      continue;
    }
    size_t j;
    for (j = 0; j < st->ntargets; j++)
      if (st->targets[j].pid == tg[i].pid) break;
    if (j < st->ntargets && st->targets[j].start_time == tg[i].start_time && !st->targets[j].gone)
      continue; /* already known */
    if (j == st->ntargets) {
      if (st->ntargets == st->targets_cap) {
        size_t ncap = st->targets_cap ? st->targets_cap * 2 : 64;
        struct target *g = realloc(st->targets, ncap * sizeof(*g));
        if (!g) return -ENOMEM;
        st->targets = g;
        st->targets_cap = ncap;
      }
      st->ntargets++;
    } else {
      php_walker_forget_pid(st->walker, tg[i].pid); /* pid reused */
    }
    struct target *t = &st->targets[j];
    memset(t, 0, sizeof(*t));
    t->pid = tg[i].pid;
    t->start_time = tg[i].start_time;
    attach(st, t);
  }
  return 0;
}

static int php_tick(void *state, uint64_t now_ns) {
  (void)now_ns;
  struct state *st = state;
  for (size_t i = 0; i < st->ntargets; i++) {
    struct target *t = &st->targets[i];
    if (t->gone || t->status != PP_PID_OK) continue;
    const struct php_frame *frames;
    uint32_t nf = 0;
    switch (php_walk(st->walker, t->pid, &t->at, &frames, &nf)) {
      case PHP_WALK_TRUNCATED:
        st->truncated++;
        /* fall through */
      case PHP_WALK_OK:
        st->samples++;
        if (php_agg_add(st->agg, t->pid, t->comm, frames, nf) < 0) st->dropped++;
        break;
      case PHP_WALK_IDLE:
        st->idle++;
        break;
      case PHP_WALK_TORN:
        st->torn++;
        break;
      case PHP_WALK_DENIED:
        st->denied++;
        t->status = PP_PID_ERROR;
        snprintf(t->reason, sizeof(t->reason),
                 "cannot read memory of pid %u: permission denied (CAP_SYS_PTRACE)", t->pid);
        LOG(st, PP_LOG_WARNING, "%s", t->reason);
        break;
      default: /* gone */
        st->gone++;
        t->gone = true;
        break;
    }
  }
  return 0;
}

static int php_snapshot(void *state, struct pp_sink *sink) {
  struct state *st = state;
  const struct pp_host *h = st->host;
  php_agg_flush(st->agg, h, sink);
  for (size_t i = 0; i < st->ntargets;) {
    struct target *t = &st->targets[i];
    uint64_t start = 0;
    bool alive = !t->gone && h->proc_start_time(h, t->pid, &start) == 0 && start == t->start_time;
    if (!alive) {
      /* exited (an FPM worker recycled): forget it; a new pid comes through add_targets */
      php_walker_forget_pid(st->walker, t->pid);
      st->targets[i] = st->targets[--st->ntargets];
      continue;
    }
    if (t->status != PP_PID_OK) {
      h->set_pid_status(sink, t->pid, t->status, t->reason);
    } else {
      char meta[96];
      snprintf(meta, sizeof(meta), "{\"php_version\": \"%d.%d\", \"php_layout\": \"%s\"}",
               t->at.major, t->at.minor, t->at.layout->tested ? "tested" : "untested");
      h->set_app_metadata(sink, t->pid, meta);
    }
    i++;
  }
  h->add_counter(sink, "samples", st->samples);
  h->add_counter(sink, "idle", st->idle);
  h->add_counter(sink, "torn_samples", st->torn);
  h->add_counter(sink, "truncated_stacks", st->truncated);
  h->add_counter(sink, "dropped_stacks", st->dropped);
  h->add_counter(sink, "exited_targets", st->gone);
  h->add_counter(sink, "stale_lines", php_walker_take_stale_lines(st->walker));
  if (st->dropped)
    LOG(st, PP_LOG_WARNING, "stack table full: %llu samples dropped (max_stacks / arena_kib)",
        (unsigned long long)st->dropped);
  st->samples = st->idle = st->torn = st->truncated = st->dropped = st->gone = 0;
  return 0;
}

static int php_stop(void *state) {
  struct state *st = state;
  st->ntargets = 0;
  return 0;
}

static void php_fini(void *state) {
  struct state *st = state;
  if (!st) return;
  php_walker_free(st->walker);
  php_agg_free(st->agg);
  free(st->targets);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "php",
    .version = "0.1.0",
    .description = "PHP call stacks read from outside the process (phpspy-style)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE | PP_CAP_ARCH_X86_64,
    .match_exe = match_exe,
    .match_maps = match_maps,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = php_init,
    .start = php_start,
    .add_targets = php_add_targets,
    .tick = php_tick,
    .snapshot = php_snapshot,
    .stop = php_stop,
    .fini = php_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
