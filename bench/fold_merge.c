/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Folding + merge benchmark against the classic shell fold, same run:
 *
 *   peer:     LC_ALL=C sort FILE | uniq -c > out
 *   polyprof: read FILE, fold its lines into a pp_profile, merge it as the
 *             perf base with a runtime profile covering some pids, write
 *             .col (and the HTML flame graph when the writer is built)
 *             through pp_output_publish.
 *
 * FILE holds N raw samples (default 1,000,000), one stack per line
 * "<pid>;<comm>;<root>;...;<leaf>", drawn with a skewed (Zipf-like)
 * distribution from D distinct stacks (default 50,000) of depth 10-40 with
 * runtime-flavoured frame names; everything comes from a fixed-seed PRNG.
 * Generation and each measured side run in their own child process, so
 * peak RSS (wait4's ru_maxrss) is the measured work's only. Each side runs
 * --runs times (default 3); the best wall time of each is reported.
 *
 * Usage: fold_merge [--lines N] [--stacks D] [--runs R] [--dir DIR] [--keep]
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "merge.h"
#include "output/col.h"
#include "output/files.h"
#include "output/html.h"
#include "profile.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
  fprintf(stderr, "fold_merge: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* ---- workload ------------------------------------------------------------ */

enum rt { RT_NATIVE, RT_PYTHON, RT_JAVA, RT_NODE, RT_KERNEL };

static const struct proc {
  uint32_t pid;
  const char *comm;
  enum rt rt;
} procs[] = {
    {0, "swapper/0", RT_KERNEL},     {1187, "postgres", RT_NATIVE},
    {1188, "postgres", RT_NATIVE},   {1190, "postgres", RT_NATIVE},
    {2210, "nginx", RT_NATIVE},      {2211, "nginx", RT_NATIVE},
    {3301, "python3", RT_PYTHON},    {3302, "python3", RT_PYTHON},
    {3307, "gunicorn", RT_PYTHON},   {3310, "celery", RT_PYTHON},
    {4401, "java", RT_JAVA},         {4420, "java", RT_JAVA},
    {4433, "kafka-server", RT_JAVA}, {5501, "node", RT_NODE},
    {5502, "node", RT_NODE},         {6601, "redis-server", RT_NATIVE},
    {7001, "containerd", RT_NATIVE}, {7002, "dockerd", RT_NATIVE},
    {88, "kworker/u8:2", RT_KERNEL}, {9100, "envoy", RT_NATIVE},
};
#define NPROCS (sizeof(procs) / sizeof(procs[0]))

static const char *w1[] = {"Exec", "Heap",  "Btree", "Lock", "Buf",  "Xact", "Hash", "Tuple",
                           "Plan", "Parse", "Index", "Wal",  "Slru", "Proc", "Mem",  "Sort"};
static const char *w2[] = {"Scan", "Insert", "Fetch", "Release", "Acquire", "Init",   "Process",
                           "Walk", "Next",   "Flush", "Build",   "Lookup",  "Update", "Delete"};
static const char *w3[] = {"Node", "Page", "Entry",   "Tuple", "Buffer", "State",
                           "Slot", "",     "Context", "Chunk", "Batch",  "Range"};
static const char *pkgs[] = {"django", "requests", "urllib3", "sqlalchemy", "celery", "flask",
                             "json",   "asyncio",  "numpy",   "pandas",     "grpc",   "redis"};
static const char *jpk[] = {"org/apache/kafka/common/network",
                            "com/example/orders/service",
                            "java/util/concurrent",
                            "io/netty/channel/nio",
                            "org/springframework/web/servlet",
                            "com/fasterxml/jackson/databind"};
static const char *ksym[] = {"entry_SYSCALL_64_after_hwframe",
                             "do_syscall_64",
                             "__x64_sys_read",
                             "ksys_read",
                             "vfs_read",
                             "new_sync_read",
                             "sock_read_iter",
                             "tcp_recvmsg",
                             "tcp_recvmsg_locked",
                             "skb_copy_datagram_iter",
                             "__x64_sys_epoll_wait",
                             "do_epoll_wait",
                             "ep_poll",
                             "schedule_hrtimeout_range",
                             "schedule",
                             "__schedule",
                             "finish_task_switch.isra.0",
                             "futex_wait",
                             "__x64_sys_futex",
                             "do_futex",
                             "asm_sysvec_apic_timer_interrupt",
                             "irq_exit_rcu",
                             "__do_softirq",
                             "net_rx_action",
                             "cpuidle_enter_state",
                             "intel_idle",
                             "do_idle",
                             "cpu_startup_entry"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Frame number `v` of a runtime's vocabulary, as text with its suffix. */
static int frame_text(enum rt rt, uint64_t v, char *b, size_t n) {
  switch (rt) {
    case RT_PYTHON:
      return snprintf(b, n, "%s%s (/usr/lib/python3.11/site-packages/%s/%s.py:%u)_[p]",
                      w2[v % N(w2)], w3[(v / 7) % N(w3)], pkgs[(v / 3) % N(pkgs)],
                      w1[(v / 11) % N(w1)], (unsigned)(v % 900) + 12);
    case RT_JAVA: {
      static const char *sfx[] = {"_[j]", "_[j]", "_[j]", "_[i]", "_[1]", "_[0]"};
      return snprintf(b, n, "%s/%s%sImpl.%s%s(Ljava/lang/String|I)V%s", jpk[v % N(jpk)],
                      w1[(v / 5) % N(w1)], w3[(v / 3) % N(w3)], w2[(v / 13) % N(w2)],
                      w3[(v / 17) % N(w3)], sfx[v % N(sfx)]);
    }
    case RT_NODE:
      return snprintf(b, n, "%s%s (/srv/app/node_modules/%s/lib/%s.js:%u)", w2[v % N(w2)],
                      w3[(v / 5) % N(w3)], pkgs[(v / 7) % N(pkgs)], w1[(v / 3) % N(w1)],
                      (unsigned)(v % 400) + 1);
    case RT_KERNEL:
      return snprintf(b, n, "%s_[k]", ksym[v % N(ksym)]);
    default:
      return snprintf(b, n, "%s%s%s", w1[v % N(w1)], w2[(v / 3) % N(w2)], w3[(v / 7) % N(w3)]);
  }
}

/* One distinct stack line; shared prefixes come from a narrow branching
 * (each frame picks one of 3 successors of its parent). */
static size_t make_stack(char *b, size_t cap) {
  const struct proc *p = &procs[rnd() % NPROCS];
  int depth = 10 + (int)(rnd() % 31);
  size_t at = (size_t)snprintf(b, cap, "%u;%s", p->pid, p->comm);
  static const char *roots[] = {"_start", "__libc_start_main", "main"};
  static const char *troots[] = {"clone3", "start_thread"};
  static const char *kroots[] = {"secondary_startup_64_[k]", "start_secondary_[k]",
                                 "cpu_startup_entry_[k]", "do_idle_[k]"};
  static const char *wroots[] = {"ret_from_fork_[k]", "kthread_[k]", "worker_thread_[k]",
                                 "process_one_work_[k]"};
  bool thread = rnd() % 2;
  int d = 0;
  const char **r = p->rt == RT_KERNEL ? (p->pid ? wroots : kroots) : thread ? troots : roots;
  int nr = p->rt == RT_KERNEL ? 4 : thread ? 2 : 3;
  for (; d < nr; d++)
    at += (size_t)snprintf(b + at, cap - at, ";%s", r[d]);
  int ktail = p->rt == RT_KERNEL ? depth - d : (rnd() % 3 == 0 ? 2 + (int)(rnd() % 5) : 0);
  uint64_t v = p->pid * 7919u + (uint64_t)thread;
  for (; d < depth - ktail; d++) {
    v = v * 2654435761u + 1 + rnd() % 3;
    enum rt rt = p->rt;
    if (rt != RT_NATIVE && d >= depth - ktail - 2) rt = RT_NATIVE; /* native leaf under a VM */
    b[at++] = ';';
    at += (size_t)frame_text(rt, v % 5000, b + at, cap - at);
  }
  for (int k = 0; k < ktail; k++, d++) {
    b[at++] = ';';
    at += (size_t)frame_text(RT_KERNEL, (v >> 8) + (uint64_t)k * 3 + rnd() % 2, b + at, cap - at);
  }
  return at;
}

/* Writes the input file; returns its size. Runs in a child. */
static void generate(const char *path, size_t nlines, size_t nstacks) {
  struct pp_profile *set = pp_profile_new(); /* distinct line texts */
  char buf[8192];
  while (pp_profile_str_count(set) < nstacks) {
    size_t n = make_stack(buf, sizeof(buf));
    if (pp_profile_intern(set, buf, n) == PP_NO_STR) die("intern");
  }
  /* Zipf-ish weights: stack k has weight 1/(k+1)^0.9; every stack at least once */
  double *cum = malloc(nstacks * sizeof(double)), sum = 0;
  uint32_t *order = malloc(nlines * sizeof(uint32_t));
  if (!cum || !order) die("malloc");
  for (size_t k = 0; k < nstacks; k++)
    cum[k] = sum += 1.0 / pow((double)k + 1, 0.9);
  for (size_t i = 0; i < nlines; i++) {
    if (i < nstacks) {
      order[i] = (uint32_t)i;
      continue;
    }
    double x = (double)(rnd() >> 11) / 9007199254740992.0 * sum;
    size_t lo = 0, hi = nstacks - 1;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (cum[mid] < x)
        lo = mid + 1;
      else
        hi = mid;
    }
    order[i] = (uint32_t)lo;
  }
  for (size_t i = nlines - 1; i > 0; i--) { /* shuffle: samples arrive interleaved */
    size_t j = rnd() % (i + 1);
    uint32_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  FILE *f = fopen(path, "w");
  if (!f) die(path);
  for (size_t i = 0; i < nlines; i++) {
    fwrite(pp_profile_str(set, order[i]), 1, pp_profile_str_len(set, order[i]), f);
    fputc('\n', f);
  }
  if (fclose(f) != 0) die(path);
  free(cum);
  free(order);
  pp_profile_free(set);
}

/* ---- polyprof side ------------------------------------------------------- */

struct result {
  double wall, fold, merge, col, html, cpu, launch;
  uint64_t distinct, total, merged_stacks, merged_total, col_bytes, html_bytes;
  long maxrss_kb;
  int rc;
};

/* Fold: identical lines are counted first (one hash probe per sample), then
 * each distinct line is split into frames once and added to the profile. */
static int fold_file(const char *path, struct pp_profile *perf) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct pp_profile *lines = pp_profile_new();
  size_t cap = 1 << 22, len = 0, ncounts = 0;
  char *buf = malloc(cap);
  uint64_t *counts = NULL;
  if (!buf || !lines) return -ENOMEM;
  for (;;) {
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0) return -errno;
    len += (size_t)r;
    size_t start = 0;
    for (;;) {
      char *nl = memchr(buf + start, '\n', len - start);
      if (!nl && r > 0) break; /* partial line: read more */
      size_t n = nl ? (size_t)(nl - buf) - start : len - start;
      if (!nl && n == 0) break;
      uint32_t id = pp_profile_intern(lines, buf + start, n);
      if (id == PP_NO_STR) return -ENOMEM;
      if (id >= ncounts) {
        size_t nc = ncounts ? ncounts * 2 : 65536;
        uint64_t *c = realloc(counts, nc * sizeof(*c));
        if (!c) return -ENOMEM;
        memset(c + ncounts, 0, (nc - ncounts) * sizeof(*c));
        counts = c;
        ncounts = nc;
      }
      counts[id]++;
      start += n + (nl ? 1 : 0);
      if (!nl) break;
    }
    memmove(buf, buf + start, len - start);
    len -= start;
    if (r == 0) break;
    if (len == cap) return -E2BIG; /* a line longer than the buffer */
  }
  close(fd);
  free(buf);

  static uint32_t frames[PP_MAX_FRAMES];
  const char *suffix[PP_FRAME_KIND_COUNT];
  for (unsigned k = 0; k < PP_FRAME_KIND_COUNT; k++)
    suffix[k] = pp_frame_kind_suffix(k);
  for (uint32_t id = 0; id < pp_profile_str_count(lines); id++) {
    const char *s = pp_profile_str(lines, id), *end = s + pp_profile_str_len(lines, id);
    uint32_t pid = (uint32_t)strtoul(s, NULL, 10), n = 0;
    const char *f = memchr(s, ';', (size_t)(end - s)) + 1;
    const char *sc = memchr(f, ';', (size_t)(end - f));
    uint32_t comm = pp_profile_intern(perf, f, (size_t)(sc - f));
    for (f = sc + 1; f < end && n < PP_MAX_FRAMES;) {
      sc = memchr(f, ';', (size_t)(end - f));
      size_t fl = (size_t)((sc ? sc : end) - f);
      uint32_t kind = PP_FRAME_NATIVE;
      if (fl > 3 && f[fl - 1] == ']') {
        for (unsigned k = 1; k < PP_FRAME_KIND_COUNT; k++) {
          size_t sl = strlen(suffix[k]);
          if (sl && fl > sl && memcmp(f + fl - sl, suffix[k], sl) == 0) {
            kind = k;
            fl -= sl;
            break;
          }
        }
      }
      uint32_t name = pp_profile_intern(perf, f, fl);
      frames[n++] = pp_profile_intern_frame(perf, name, PP_NO_STR, 0, kind);
      f = sc ? sc + 1 : end;
    }
    struct pp_pid_rec *r = pp_profile_pid_upsert(perf, pid);
    if (!r) return -ENOMEM;
    if (r->comm == PP_NO_STR) r->comm = comm;
    int rc =
        pp_profile_add_stack(perf, pid, r->comm == comm ? PP_NO_STR : comm, frames, n, counts[id]);
    if (rc < 0) return rc;
  }
  free(counts);
  pp_profile_free(lines);
  return 0;
}

/* What a Python and a Java plugin would have reported for their pids. */
static void runtime_snapshot(struct pp_profile *rt) {
  char b[512];
  for (size_t i = 0; i < NPROCS; i++) {
    if (procs[i].rt != RT_PYTHON && procs[i].rt != RT_JAVA) continue;
    uint32_t comm = pp_profile_intern_cstr(rt, procs[i].comm);
    pp_profile_pid_upsert(rt, procs[i].pid)->comm = comm;
    for (int s = 0; s < 2000; s++) {
      uint32_t fr[40], n = 8 + (uint32_t)(rnd() % 24);
      uint64_t v = procs[i].pid;
      for (uint32_t k = 0; k < n; k++) {
        v = v * 2654435761u + 1 + rnd() % 4;
        int len = frame_text(procs[i].rt, v % 3000, b, sizeof(b));
        size_t sl = strlen(b) - (size_t)(strrchr(b, '_') - b); /* drop the suffix text */
        uint32_t kind = procs[i].rt == RT_PYTHON ? PP_FRAME_PYTHON : PP_FRAME_JAVA_JIT;
        fr[k] = pp_profile_intern_frame(rt, pp_profile_intern(rt, b, (size_t)len - sl), PP_NO_STR,
                                        0, kind);
      }
      pp_profile_add_stack(rt, procs[i].pid, PP_NO_STR, fr, n, 1 + rnd() % 40);
    }
  }
  /* one runtime pid perf did not sample, and one the plugin failed on */
  uint32_t fr = pp_profile_intern_frame(rt, pp_profile_intern_cstr(rt, "<module> (/srv/job.py:1)"),
                                        PP_NO_STR, 0, PP_FRAME_PYTHON);
  pp_profile_add_stack(rt, 3399, pp_profile_intern_cstr(rt, "python3"), &fr, 1, 17);
  pp_profile_pid_upsert(rt, 3310)->status = PP_PID_ERROR;
  uint32_t reason = pp_profile_intern_cstr(rt, "exception TimeoutExpired");
  pp_profile_pid(rt, 3310)->reason = reason;
}

struct out_ctx {
  const struct pp_profile *p;
  const char *header;
  uint64_t bytes;
};

static int write_col_fn(FILE *f, void *c) {
  struct out_ctx *o = c;
  int rc = pp_col_write(f, o->p, o->header, NULL);
  o->bytes = (uint64_t)ftell(f);
  return rc;
}

static int write_html_fn(FILE *f, void *c) {
  struct out_ctx *o = c;
  struct pp_html_info info = {.title = "polyprof — fold_merge bench",
                              .start_time = "2026-11-22T03:49:00",
                              .end_time = "2026-11-22T03:50:00",
                              .duration_s = 60,
                              .hostname = "bench"};
  int rc = pp_html_write(f, o->p, &info);
  o->bytes = (uint64_t)ftell(f);
  return rc;
}

static void run_polyprof(const char *path, const char *dir, struct result *res) {
  struct pp_profile *perf = pp_profile_new(), *rt = pp_profile_new(), *out = pp_profile_new();
  runtime_snapshot(rt); /* plugin output: not part of the measured work */
  char err[512];
  double t0 = now();
  res->rc = fold_file(path, perf);
  double t1 = now();
  struct pp_merge_source src[] = {{"runtime", rt}};
  if (!res->rc) res->rc = pp_merge(out, perf, src, 1);
  double t2 = now();
  struct out_ctx oc = {out, "{\"containers\": [], \"application_metadata\": [null]}", 0};
  if (!res->rc)
    res->rc = pp_output_publish(dir, "profile_bench", ".col", "last_profile.col", false,
                                write_col_fn, &oc, err, sizeof(err));
  res->col_bytes = oc.bytes;
  double t3 = now();
  oc.bytes = 0;
  if (!res->rc)
    res->rc = pp_output_publish(dir, "profile_bench", ".html", "last_flamegraph.html", false,
                                write_html_fn, &oc, err, sizeof(err));
  res->html_bytes = oc.bytes;
  double t4 = now();
  if (res->rc) fprintf(stderr, "fold_merge: polyprof side failed: %s (%d)\n", err, res->rc);
  res->wall = t4 - t0;
  res->fold = t1 - t0;
  res->merge = t2 - t1;
  res->col = t3 - t2;
  res->html = t4 - t3;
  res->distinct = pp_profile_stack_count(perf);
  res->total = pp_profile_total(perf);
  res->merged_stacks = pp_profile_stack_count(out);
  res->merged_total = pp_profile_total(out);
  pp_profile_free(perf);
  pp_profile_free(rt);
  pp_profile_free(out);
}

/* Reads the .col back as `upload-file` / `convert` would: the same samples
 * as the merged profile (stacks of different pids with the same comm and
 * frames may fold together, lines carry no pid), and how long that takes. */
static bool parse_back(const char *dir, const struct result *pp, double *secs) {
  char path[4200], err[256];
  snprintf(path, sizeof(path), "%s/profile_bench.col", dir);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char *text = malloc(pp->col_bytes + 1);
  size_t n = text ? fread(text, 1, pp->col_bytes + 1, f) : 0;
  fclose(f);
  struct pp_profile *p = pp_profile_new();
  double t0 = now();
  int rc = pp_col_parse(text, n, p, NULL, err, sizeof(err));
  *secs = now() - t0;
  if (rc) fprintf(stderr, "fold_merge: parsing %s: %s\n", path, err);
  bool ok = !rc && n == pp->col_bytes && pp_profile_total(p) == pp->merged_total &&
            pp_profile_stack_count(p) <= pp->merged_stacks;
  pp_profile_free(p);
  free(text);
  return ok;
}

/* ---- process plumbing ---------------------------------------------------- */

static double tv(struct timeval t) {
  return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

static void measure_polyprof(const char *path, const char *dir, struct result *res) {
  int p[2];
  if (pipe(p) < 0) die("pipe");
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(p[0]);
    struct result r = {0};
    run_polyprof(path, dir, &r);
    if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r)) _exit(3);
    _exit(0);
  }
  close(p[1]);
  if (read(p[0], res, sizeof(*res)) != (ssize_t)sizeof(*res)) res->rc = -EIO;
  close(p[0]);
  struct rusage ru;
  int st;
  if (wait4(pid, &st, 0, &ru) < 0) die("wait4");
  res->launch = now() - t0; /* with fork, snapshot building and exit */
  res->maxrss_kb = ru.ru_maxrss;
  res->cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
  if (!WIFEXITED(st) || WEXITSTATUS(st)) res->rc = -ECHILD;
}

/* sort FILE | uniq -c > out, as two processes joined by a pipe. */
static void measure_peer(const char *path, const char *out, struct result *res) {
  int p[2];
  if (pipe(p) < 0) die("pipe");
  double t0 = now();
  pid_t s = fork();
  if (s == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    setenv("LC_ALL", "C", 1);
    execlp("sort", "sort", path, (char *)NULL);
    _exit(127);
  }
  pid_t u = fork();
  if (u == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    dup2(p[0], 0);
    dup2(fd, 1);
    close(p[0]);
    close(p[1]);
    setenv("LC_ALL", "C", 1);
    execlp("uniq", "uniq", "-c", (char *)NULL);
    _exit(127);
  }
  if (s < 0 || u < 0) die("fork");
  close(p[0]);
  close(p[1]);
  struct rusage ru1, ru2;
  int st1, st2;
  if (wait4(s, &st1, 0, &ru1) < 0 || wait4(u, &st2, 0, &ru2) < 0) die("wait4");
  res->wall = now() - t0;
  res->maxrss_kb = ru1.ru_maxrss > ru2.ru_maxrss ? ru1.ru_maxrss : ru2.ru_maxrss;
  res->cpu = tv(ru1.ru_utime) + tv(ru1.ru_stime) + tv(ru2.ru_utime) + tv(ru2.ru_stime);
  res->rc = (WIFEXITED(st1) && !WEXITSTATUS(st1) && WIFEXITED(st2) && !WEXITSTATUS(st2)) ? 0 : -1;
  /* count what the peer produced, as a cross-check */
  FILE *f = fopen(out, "r");
  char line[16384];
  while (f && fgets(line, sizeof(line), f)) {
    res->distinct += !!strchr(line, '\n');
    res->total += strtoull(line, NULL, 10);
  }
  if (f) fclose(f);
}

int main(int argc, char **argv) {
  size_t nlines = 1000000, nstacks = 50000;
  int runs = 3;
  bool keep = false;
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--lines") && i + 1 < argc)
      nlines = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
      nstacks = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      base = argv[++i];
    else if (!strcmp(argv[i], "--keep"))
      keep = true;
    else {
      fprintf(stderr, "usage: %s [--lines N] [--stacks D] [--runs R] [--dir DIR] [--keep]\n",
              argv[0]);
      return 2;
    }
  }
  if (nstacks == 0 || nlines < nstacks || runs < 1) {
    fprintf(stderr, "fold_merge: need 0 < stacks <= lines and runs >= 1\n");
    return 2;
  }
  char dir[4096], input[4200], peer_out[4200];
  snprintf(dir, sizeof(dir), "%s/fold_merge.XXXXXX", base);
  if (!mkdtemp(dir)) die(dir);
  snprintf(input, sizeof(input), "%s/samples.txt", dir);
  snprintf(peer_out, sizeof(peer_out), "%s/peer.txt", dir);

  pid_t g = fork();
  if (g == 0) {
    generate(input, nlines, nstacks);
    _exit(0);
  }
  int st;
  if (g < 0 || waitpid(g, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) die("generate");
  struct stat sb;
  stat(input, &sb);
  printf("input: %zu lines, %zu distinct stacks, %.1f MiB (%s)\n", nlines, nstacks,
         (double)sb.st_size / 1048576.0, input);

  struct result peer = {.wall = 1e30}, pp = {.wall = 1e30};
  for (int r = 0; r < runs; r++) { /* alternate, so both see the same machine state */
    struct result a = {0}, b = {0};
    measure_peer(input, peer_out, &a);
    measure_polyprof(input, dir, &b);
    if (a.rc || b.rc) {
      fprintf(stderr, "fold_merge: run %d failed (peer %d, polyprof %d)\n", r, a.rc, b.rc);
      return 1;
    }
    if (a.wall < peer.wall) peer = a;
    if (b.wall < pp.wall) pp = b;
  }
  bool agree = peer.distinct == pp.distinct && peer.total == pp.total && pp.total == nlines;
  printf("check: peer %llu distinct / %llu samples, polyprof %llu / %llu: %s\n",
         (unsigned long long)peer.distinct, (unsigned long long)peer.total,
         (unsigned long long)pp.distinct, (unsigned long long)pp.total,
         agree ? "agree" : "DISAGREE");
  printf("peer_seconds %.3f  (LC_ALL=C sort | uniq -c, best of %d, cpu %.3f s)\n", peer.wall, runs,
         peer.cpu);
  printf(
      "polyprof_seconds %.3f  (fold %.3f + merge %.3f + col %.3f + html %.3f; child process "
      "%.3f s wall incl. fork and runtime snapshot setup, cpu %.3f s)\n",
      pp.wall, pp.fold, pp.merge, pp.col, pp.html, pp.launch, pp.cpu);
  printf("ratio %.2fx  (peer / polyprof wall time)\n", peer.wall / pp.wall);
  printf("polyprof_peak_rss_mib %.1f\n", (double)pp.maxrss_kb / 1024.0);
  printf("peer_peak_rss_mib %.1f\n", (double)peer.maxrss_kb / 1024.0);
  printf("outputs: merged %llu stacks, .col %.1f MiB, .html %.1f MiB\n",
         (unsigned long long)pp.merged_stacks, (double)pp.col_bytes / 1048576.0,
         (double)pp.html_bytes / 1048576.0);
  double parse_s = 0;
  bool parsed = parse_back(dir, &pp, &parse_s);
  printf("col_parse_seconds %.3f  (reading the .col back: %s)\n", parse_s,
         parsed ? "same samples" : "MISMATCH");
  if (!keep) {
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "fold_merge: could not remove %s\n", dir);
  } else {
    printf("kept: %s\n", dir);
  }
  return agree && parsed ? 0 : 1;
}
