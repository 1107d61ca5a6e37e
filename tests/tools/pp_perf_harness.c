/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Drives a system-wide plugin (the perf plugin) without the agent: dlopen,
 * init with options from the command line, start, tick, snapshot, stop. It
 * writes what the plugin emitted as collapsed stacks, one line per stack:
 *
 *   # {"counters": {...}, "app_metadata": {"<pid>": {...}}, "cpu_s": ..., "max_rss_kb": ...,
 *      "rss_kb": [...]}
 *   <pid>;<comm>;<root frame>;...;<leaf frame> <count>
 *
 * with gProfiler's suffixes (_[k] for kernel frames). "counters" repeats
 * each key once per session (a JSON reader keeps the last session's);
 * "rss_kb" is the harness's VmRSS right after each snapshot, to see memory
 * the plugin gave back. Used by the perf
 * integration tests and bench/perf, and handy to debug the plugin under gdb
 * or valgrind.
 *
 *   pp_perf_harness PLUGIN.so [-d SECONDS] [-F HZ] [-m MODE] [-o FILE]
 *                   [-s SESSIONS] [--opt key=value]... [--list key=a,b]...
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"
#include "polyprof/plugin.h"

#define MAX_OPTS 64

static struct {
  const char *key;
  char *value;
} opts[MAX_OPTS];
static int nopts;
static const char *list_items[MAX_OPTS][256];
static size_t list_counts[MAX_OPTS];
static FILE *out;
static int verbose;
static char counters[32768] = "";
static char appmeta[8192] = "";
static char rss_after[1024] = "";

/* VmRSS now, in KiB (-1 if unreadable). */
static long current_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
  fclose(f);
  return kb;
}

static const char *find_opt(const char *key, int *idx) {
  for (int i = 0; i < nopts; i++)
    if (strcmp(opts[i].key, key) == 0) {
      if (idx) *idx = i;
      return opts[i].value;
    }
  return NULL;
}

static void h_log(const struct pp_host *h, int level, const char *fmt, ...) {
  static const char *names[] = {"debug", "info", "warning", "error"};
  if (level == PP_LOG_DEBUG && !verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[%s] perf: ", names[level & 3]);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static int h_string(const struct pp_host *h, const char *key, const char **o) {
  const char *v = find_opt(key, NULL);
  if (!v) return -ENOENT;
  *o = v;
  return 0;
}

static int h_int(const struct pp_host *h, const char *key, int64_t *o) {
  const char *v = find_opt(key, NULL);
  if (!v) return -ENOENT;
  *o = strtoll(v, NULL, 10);
  return 0;
}

static int h_bool(const struct pp_host *h, const char *key, int *o) {
  const char *v = find_opt(key, NULL);
  if (!v) return -ENOENT;
  *o = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
  return 0;
}

static int h_list(const struct pp_host *h, const char *key, const char *const **items,
                  size_t *count) {
  int idx;
  if (!find_opt(key, &idx)) return -ENOENT;
  *items = list_items[idx];
  *count = list_counts[idx];
  return 0;
}

static uint64_t h_mono(const struct pp_host *h) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t h_real(const struct pp_host *h) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_frame(const struct pp_frame *f) {
  for (const char *c = f->name ? f->name : "[unknown]"; *c; c++)
    fputc(*c == ';' ? '|' : (*c == '\n' ? ' ' : *c), out);
  if (f->kind == PP_FRAME_KERNEL) fputs("_[k]", out);
}

static int h_emit(struct pp_sink *sink, const struct pp_sample *s) {
  fprintf(out, "%u;%s", s->pid, s->comm ? s->comm : "?");
  for (uint32_t i = s->nframes; i > 0; i--) {
    fputc(';', out);
    put_frame(&s->frames[i - 1]);
  }
  fprintf(out, " %llu\n", (unsigned long long)s->count);
  return 0;
}

static int h_appid(struct pp_sink *sink, uint32_t pid, const char *appid) {
  return 0;
}

static int h_meta(struct pp_sink *sink, uint32_t pid, const char *json) {
  size_t n = strlen(appmeta);
  snprintf(appmeta + n, sizeof(appmeta) - n, "%s\"%u\": %s", n ? ", " : "", pid, json);
  return 0;
}

static int h_status(struct pp_sink *sink, uint32_t pid, int status, const char *reason) {
  return 0;
}

static int h_counter(struct pp_sink *sink, const char *name, uint64_t delta) {
  size_t n = strlen(counters);
  snprintf(counters + n, sizeof(counters) - n, "%s\"%s\": %llu", n ? ", " : "", name,
           (unsigned long long)delta);
  return 0;
}

static int h_comm(const struct pp_host *h, uint32_t pid, char *buf, size_t len) {
  return pp_proc_comm(pid, buf, len);
}
static int h_exe(const struct pp_host *h, uint32_t pid, char *buf, size_t len) {
  return pp_proc_exe(pid, buf, len);
}
static int h_nspid(const struct pp_host *h, uint32_t pid, uint32_t *ns) {
  return pp_proc_ns_pid(pid, ns);
}
static int h_root(const struct pp_host *h, uint32_t pid, char *buf, size_t len) {
  return pp_proc_root(pid, buf, len);
}
static int h_start(const struct pp_host *h, uint32_t pid, uint64_t *t) {
  return pp_proc_start_time(pid, t);
}
static const char *h_scratch(const struct pp_host *h) {
  return "/tmp";
}

static struct pp_host host = {
    .struct_size = sizeof(struct pp_host),
    .abi_major = PP_ABI_MAJOR,
    .abi_minor = PP_ABI_MINOR,
    .log = h_log,
    .config_string = h_string,
    .config_int = h_int,
    .config_bool = h_bool,
    .config_list = h_list,
    .monotonic_ns = h_mono,
    .realtime_ns = h_real,
    .emit = h_emit,
    .set_appid = h_appid,
    .set_app_metadata = h_meta,
    .set_pid_status = h_status,
    .add_counter = h_counter,
    .proc_comm = h_comm,
    .proc_exe = h_exe,
    .proc_ns_pid = h_nspid,
    .proc_root = h_root,
    .proc_start_time = h_start,
    .scratch_dir = h_scratch,
};

static void add_opt(const char *kv, int is_list) {
  if (nopts >= MAX_OPTS) return;
  char *eq = strchr(kv, '=');
  if (!eq) {
    fprintf(stderr, "option %s: expected key=value\n", kv);
    exit(2);
  }
  char *key = strndup(kv, (size_t)(eq - kv));
  char *val = strdup(eq + 1);
  opts[nopts].key = key;
  opts[nopts].value = val;
  if (is_list) {
    char *save = NULL, *copy = strdup(val);
    for (char *t = strtok_r(copy, ",", &save); t && list_counts[nopts] < 255;
         t = strtok_r(NULL, ",", &save))
      list_items[nopts][list_counts[nopts]++] = t;
  }
  nopts++;
}

int main(int argc, char **argv) {
  double duration = 3;
  unsigned freq = 99;
  const char *mode = NULL, *outfile = NULL;
  int sessions = 1;
  static const struct option lo[] = {
      {"opt", required_argument, 0, 'O'}, {"list", required_argument, 0, 'L'}, {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "d:F:m:o:s:v", lo, NULL)) != -1) {
    switch (c) {
      case 'd':
        duration = atof(optarg);
        break;
      case 'F':
        freq = (unsigned)atoi(optarg);
        break;
      case 'm':
        mode = optarg;
        break;
      case 'o':
        outfile = optarg;
        break;
      case 's':
        sessions = atoi(optarg);
        break;
      case 'v':
        verbose = 1;
        break;
      case 'O':
        add_opt(optarg, 0);
        break;
      case 'L':
        add_opt(optarg, 1);
        break;
      default:
        return 2;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "usage: %s PLUGIN.so [-d S] [-F HZ] [-m MODE] [-o FILE] [--opt k=v]\n",
            argv[0]);
    return 2;
  }
  if (mode) {
    char kv[64];
    snprintf(kv, sizeof(kv), "mode=%s", mode);
    add_opt(kv, 0);
  }
  out = outfile ? fopen(outfile, "w") : stdout;
  if (!out) {
    perror(outfile);
    return 2;
  }
  void *so = dlopen(argv[optind], RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  pp_plugin_entry_fn entry = (pp_plugin_entry_fn)dlsym(so, PP_PLUGIN_ENTRY_SYMBOL);
  const struct pp_plugin *pl = entry ? entry() : NULL;
  if (!pl || pl->abi_major != PP_ABI_MAJOR) {
    fprintf(stderr, "not a polyprof plugin\n");
    return 2;
  }
  void *st = NULL;
  int rc = pl->init(&host, &st);
  if (rc < 0) {
    fprintf(stderr, "init failed: %s\n", strerror(-rc));
    return 3;
  }
  struct pp_session s = {.struct_size = sizeof(s),
                         .frequency_hz = freq,
                         .duration_s = (uint32_t)duration,
                         .mode = mode ? mode : "fp",
                         .tick_interval_ns = 1000000000ull / (freq ? freq : 1)};
  rc = pl->start(st, &s);
  if (rc < 0) {
    if (PP_IS_PERMANENT(rc))
      fprintf(stderr, "start failed permanently: %s\n", strerror(PP_PERMANENT_ERRNO(rc)));
    else
      fprintf(stderr, "start failed: %s\n", strerror(-rc));
    pl->fini(st);
    return 4;
  }
  /* header placeholder: rewritten at the end when writing to a file */
  for (int sess = 0; sess < sessions; sess++) {
    uint64_t end = h_mono(&host) + (uint64_t)(duration * 1e9);
    while (h_mono(&host) < end) {
      struct timespec ts = {0, (long)(s.tick_interval_ns ? s.tick_interval_ns : 100000000)};
      nanosleep(&ts, NULL);
      if (pl->tick) pl->tick(st, h_mono(&host));
    }
    pl->snapshot(st, NULL);
    size_t n = strlen(rss_after);
    snprintf(rss_after + n, sizeof(rss_after) - n, "%s%ld", n ? ", " : "", current_rss_kb());
  }
  pl->stop(st);
  pl->fini(st);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  fprintf(out,
          "# {\"counters\": {%s}, \"app_metadata\": {%s}, \"cpu_s\": %.3f, "
          "\"max_rss_kb\": %ld, \"rss_kb\": [%s]}\n",
          counters, appmeta, cpu, ru.ru_maxrss, rss_after);
  if (out != stdout) fclose(out);
  return 0;
}
