/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workers driven for real: the test plugins run in worker processes (and in
 * inline threads), crash, hang and leak, and this process must come through
 * every one of them with the right reasons and working restarts.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host.h"
#include "log.h"
#include "polyprof/kit/proc.h"
#include "supervisor.h"
#include "testlib.h"

static struct pp_plugin_info *infos;
static size_t ninfos;
static char worker_exe[4096]; /* the build's polyprof-worker */

/* ---- captured log lines ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char logbuf[64][512];
static unsigned nlog;

static void capture(int level, const char *tag, const char *msg, void *ctx) {
  pthread_mutex_lock(&log_mu);
  snprintf(logbuf[nlog % 64], sizeof(logbuf[0]), "%s %s: %s", pp_log_level_name(level), tag, msg);
  nlog++;
  pthread_mutex_unlock(&log_mu);
  fprintf(stderr, "  log: %s %s: %s\n", pp_log_level_name(level), tag, msg);
}

/* How many of the captured lines (the last 64) contain needle. */
static int logged_count(const char *needle) {
  pthread_mutex_lock(&log_mu);
  int n = 0;
  for (unsigned i = 0; i < 64 && i < nlog; i++)
    if (strstr(logbuf[i], needle)) n++;
  pthread_mutex_unlock(&log_mu);
  return n;
}

static int logged(const char *needle) {
  pthread_mutex_lock(&log_mu);
  int found = 0;
  for (unsigned i = 0; i < 64 && i < nlog; i++)
    if (strstr(logbuf[i], needle)) found = 1;
  pthread_mutex_unlock(&log_mu);
  return found;
}

/* ---- helpers ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const struct pp_plugin_info *plugin(const char *name) {
  for (size_t i = 0; i < ninfos; i++)
    if (!infos[i].error && strcmp(infos[i].desc.name, name) == 0) return &infos[i];
  fprintf(stderr, "plugin %s not found\n", name);
  exit(1);
}

/* A pp_plugin_config with some options bound (key=value pairs). */
struct cfg {
  struct pp_plugin_config pc;
  struct pp_bound_option opts[8];
};

static void bind(struct cfg *c, const struct pp_plugin_info *info, const char *key, char *value) {
  for (uint32_t i = 0; i < info->desc.option_count; i++) {
    if (strcmp(info->desc.options[i].key, key) != 0) continue;
    struct pp_bound_option *b = &c->opts[c->pc.option_count++];
    b->opt = &info->desc.options[i];
    b->scalar = value;
    return;
  }
  fprintf(stderr, "no option %s\n", key);
  exit(1);
}

/* Timeout 1 s where a test waits for it to expire; otherwise 5 s so a
 * heavily loaded machine does not turn a slow answer into a false hang. */
static struct pp_worker *make_t(const char *name, bool inline_mode, int mem_mb, struct cfg *c,
                                int timeout_s) {
  struct pp_worker_opts o = {.inline_mode = inline_mode,
                             .memory_limit_mb = mem_mb,
                             .timeout_s = timeout_s,
                             .backoff_max_s = 2,
                             .worker_path = worker_exe};
  const struct pp_plugin_info *info = plugin(name);
  struct pp_worker *w = pp_worker_new(info, c ? &c->pc : NULL, &o);
  CHECK(w != NULL);
  return w;
}

static struct pp_worker *make(const char *name, bool inline_mode, int mem_mb, struct cfg *c) {
  return make_t(name, inline_mode, mem_mb, c, 5);
}

static struct pp_session session(void) {
  struct pp_session s = {.struct_size = sizeof(s),
                         .frequency_hz = 100,
                         .duration_s = 1,
                         .mode = "slow",
                         .tick_interval_ns = 10000000};
  return s;
}

static const char *frame_name(const struct pp_profile *p, const struct pp_stack_rec *s,
                              uint32_t i) {
  const struct pp_frame_rec *f = pp_profile_frame(p, pp_profile_stack_frames(p, s)[i]);
  return f ? pp_profile_str(p, f->name) : "(none)";
}

static uint64_t counter(const struct pp_profile *p, const char *name) {
  for (size_t i = 0; i < pp_profile_counter_count(p); i++) {
    const struct pp_counter_rec *c = pp_profile_counter_at(p, i);
    if (strcmp(pp_profile_str(p, c->name), name) == 0) return c->value;
  }
  return UINT64_MAX;
}

static void snapshot(struct pp_worker *w, struct pp_profile *out, int *rc, char *err) {
  err[0] = 0;
  *rc = pp_worker_snapshot_begin(w, err, 256);
  if (*rc == 0) *rc = pp_worker_snapshot_end(w, out, err, 256);
}

/* Service until running (restart done) or `limit` seconds pass. */
static int service_until_running(struct pp_worker *w, double limit) {
  double end = now_s() + limit;
  while (now_s() < end) {
    pp_worker_service(w);
    if (pp_worker_running(w)) return 1;
    usleep(10000);
  }
  return 0;
}

/* What the supervisor relies on in a worker process: the small worker
 * executable (not a copy of this process), its own process group, the stop
 * signals ignored, nothing blocked, and no descriptor of ours but the
 * socket (fd 3) and stdio. */
static void check_worker_process(pid_t pid) {
  char path[64], exe[4096] = "";
  snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(path, exe, sizeof(exe) - 1);
  if (n > 0) exe[n] = 0;
  CHECK_EQ_STR(exe, worker_exe);
  CHECK_EQ_INT(getpgid(pid), pid);
  char status[8192] = "", *ign, *blk;
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f) {
    size_t got = fread(status, 1, sizeof(status) - 1, f);
    status[got] = 0;
    fclose(f);
  }
  ign = strstr(status, "SigIgn:\t");
  blk = strstr(status, "SigBlk:\t");
  CHECK(ign && blk);
  if (ign && blk) {
    unsigned long long ignored = strtoull(ign + 8, NULL, 16), blocked = strtoull(blk + 8, NULL, 16);
    int want[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
      CHECK(ignored & (1ull << (want[i] - 1)));
    CHECK_EQ_INT((int)(blocked != 0), 0);
  }
  /* fd 3 is the socket; 4 (the exec error pipe) and anything we hold are
   * gone. tp_ok opens nothing that it keeps. */
  char fdpath[64], target[256];
  snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/3", (int)pid);
  n = readlink(fdpath, target, sizeof(target) - 1);
  if (n > 0) target[n] = 0;
  CHECK(n > 0 && strncmp(target, "socket:", 7) == 0);
  for (int fd = 4; fd < 64; fd++) {
    snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/%d", (int)pid, fd);
    if (readlink(fdpath, target, sizeof(target) - 1) >= 0) {
      fprintf(stderr, "worker has fd %d open\n", fd);
      CHECK(0);
    }
  }
}

/* ---- tests ---- */

static void test_ok(bool inline_mode) {
  fprintf(stderr, "== ok (%s)\n", inline_mode ? "inline" : "process");
  const struct pp_plugin_info *info = plugin("tp_ok");
  struct cfg c = {.pc = {.name = "tp_ok", .enabled = true, .mode = "slow"}};
  c.pc.options = c.opts;
  char *tags[] = {"x", "y", "z", NULL};
  bind(&c, info, "greeting", "bonjour");
  bind(&c, info, "depth", "5");
  bind(&c, info, "loud", "true");
  bind(&c, info, "tags", NULL);
  c.opts[c.pc.option_count - 1].items = tags;
  c.opts[c.pc.option_count - 1].item_count = 3;
  bind(&c, info, "mode", "slow");
  struct pp_worker *w = make("tp_ok", inline_mode, 0, &c);
  CHECK_EQ_STR(pp_worker_name(w), "tp_ok");
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_fd(w), -1);

  char err[256] = "";
  struct pp_session s = session();
  int rc = pp_worker_start(w, &s, err, sizeof(err));
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "start: %s\n", err);
  CHECK(pp_worker_running(w));
  CHECK(pp_worker_fd(w) >= 0);
  pid_t wpid = pp_worker_pid(w);
  if (inline_mode) {
    CHECK_EQ_INT(wpid, 0);
  } else {
    CHECK(wpid > 0 && wpid != getpid());
    char comm[32] = "";
    pp_proc_comm((uint32_t)wpid, comm, sizeof(comm));
    CHECK_EQ_STR(comm, "pp-tp_ok");
    check_worker_process(wpid);
  }
  uint32_t p1 = (uint32_t)getpid(), p2 = (uint32_t)getppid();
  struct pp_target t[2] = {{.pid = p1}, {.pid = p2}};
  pp_proc_start_time(p1, &t[0].start_time);
  pp_proc_start_time(p2, &t[1].start_time);
  CHECK_EQ_INT(pp_worker_add_targets(w, t, 2, err, sizeof(err)), 0);
  usleep(100000); /* let some 1 ms ticks happen */
  pp_worker_service(w);

  struct pp_profile *p = pp_profile_new();
  snapshot(w, p, &rc, err);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 2);
  const struct pp_stack_rec *st = pp_profile_stack(p, 0);
  CHECK(st != NULL);
  if (st) {
    CHECK_EQ_INT(st->pid, p1);
    char comm[32] = "";
    pp_proc_comm(p1, comm, sizeof(comm));
    CHECK_EQ_STR(pp_profile_str(p, st->comm), comm); /* via host->proc_comm */
    CHECK_EQ_INT(st->count, 7);
    CHECK_EQ_INT(st->nframes, 7);
    /* root first; option values made it across */
    CHECK_EQ_STR(frame_name(p, st, 0), "root");
    CHECK_EQ_STR(frame_name(p, st, 1), "[unknown]");
    CHECK_EQ_STR(frame_name(p, st, 2), "mode_slow");
    CHECK_EQ_STR(frame_name(p, st, 3), "tags_x+y+z");
    CHECK_EQ_STR(frame_name(p, st, 4), "loud_1");
    CHECK_EQ_STR(frame_name(p, st, 5), "depth_5");
    CHECK_EQ_STR(frame_name(p, st, 6), "leaf_bonjour");
    const struct pp_frame_rec *leaf = pp_profile_frame(p, pp_profile_stack_frames(p, st)[6]);
    CHECK(leaf && leaf->kind == PP_FRAME_PYTHON && leaf->line == 42);
    if (leaf) CHECK_EQ_STR(pp_profile_str(p, leaf->file), "tp_ok.c");
    const struct pp_frame_rec *root = pp_profile_frame(p, pp_profile_stack_frames(p, st)[0]);
    CHECK(root && root->kind == PP_FRAME_KERNEL);
  }
  struct pp_pid_rec *r = pp_profile_pid(p, p1);
  CHECK(r != NULL);
  if (r) {
    char want[32];
    snprintf(want, sizeof(want), "appid-%u", p1);
    CHECK_EQ_STR(pp_profile_str(p, r->appid), want);
    CHECK_EQ_STR(pp_profile_str(p, r->app_meta), "{\"k\":\"v\",\"n\":1}");
    CHECK_EQ_INT(r->status, PP_PID_OK);
    CHECK_EQ_INT(r->total, 7);
  }
  r = pp_profile_pid(p, p2);
  CHECK(r && r->status == PP_PID_ERROR);
  if (r) CHECK_EQ_STR(pp_profile_str(p, r->reason), "tp_ok says no");
  CHECK_EQ_INT(counter(p, "snapshots"), 1);
  CHECK_EQ_INT(counter(p, "ticked"), 1);
  CHECK_EQ_INT(counter(p, "invalid_samples"), 1);
  CHECK_EQ_INT(counter(p, "scratch_ok"), 1);
  CHECK(logged("polyprof.tp_ok: tp_ok init greeting=bonjour depth=5"));
  CHECK(logged("frame kind 999 out of range"));

  /* A second snapshot holds only what came after the first. */
  snapshot(w, p, &rc, err);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(counter(p, "snapshots"), 1);
  CHECK_EQ_INT(pp_profile_total(p), 14);

  /* Snapshot protocol misuse is refused, not fatal. */
  CHECK_EQ_INT(pp_worker_snapshot_end(w, p, err, sizeof(err)), -EINVAL);
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -EBUSY);
  /* Other requests may be interleaved with a snapshot in flight. */
  CHECK_EQ_INT(pp_worker_add_targets(w, t, 1, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_worker_snapshot_end(w, p, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_worker_restarts(w), 0);

  CHECK_EQ_INT(pp_worker_stop(w), 0);
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_pid(w), 0);
  if (!inline_mode) CHECK(kill(wpid, 0) < 0 && errno == ESRCH); /* exited and reaped */
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -ENOTCONN);

  /* Start again after stop: a fresh worker. */
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  CHECK(pp_worker_running(w));
  pp_worker_free(w); /* stops it */
  pp_profile_free(p);
}

static void test_minimal(void) {
  fprintf(stderr, "== minimal (system-wide, no options)\n");
  struct pp_worker *w = make("tp_minimal", false, 0, NULL);
  char err[256];
  struct pp_session s = session();
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  struct pp_profile *p = pp_profile_new();
  int rc;
  snapshot(w, p, &rc, err);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 1);
  const struct pp_stack_rec *st = pp_profile_stack(p, 0);
  if (st) CHECK_EQ_STR(pp_profile_str(p, st->comm), "init");
  pp_profile_free(p);
  pp_worker_free(w);
}

/* A file the plugin's worker may create: in its runtime directory, the one
 * writable place of a worker's own file system view (made as the agent
 * makes it, when running as root), else in /tmp. Absent on return. */
static void worker_file(const char *plugin, const char *stem, char *out, size_t cap) {
  char dir[128];
  snprintf(dir, sizeof(dir), "/run/polyprof/%s", plugin);
  if (geteuid() == 0 && (mkdir("/run/polyprof", 0755) == 0 || errno == EEXIST) &&
      (mkdir(dir, 0700) == 0 || errno == EEXIST))
    snprintf(out, cap, "%s/%s.%d", dir, stem, (int)getpid());
  else
    snprintf(out, cap, "/tmp/%s.%d", stem, (int)getpid());
  unlink(out);
}

static void test_crash(void) {
  fprintf(stderr, "== crash in snapshot, once\n");
  const struct pp_plugin_info *info = plugin("tp_crash");
  char once[256];
  worker_file("tp_crash", "pp_test_crash", once, sizeof(once));
  struct cfg c = {.pc = {.name = "tp_crash", .enabled = true}};
  c.pc.options = c.opts;
  bind(&c, info, "crash_once_file", once);
  struct pp_worker *w = make("tp_crash", false, 0, &c);
  char err[256];
  struct pp_session s = session();
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  pid_t first = pp_worker_pid(w);
  struct pp_target t = {.pid = (uint32_t)getpid()};
  CHECK_EQ_INT(pp_worker_add_targets(w, &t, 1, err, sizeof(err)), 0);

  struct pp_profile *p = pp_profile_new();
  int rc;
  snapshot(w, p, &rc, err);
  CHECK_EQ_INT(rc, -ECHILD);
  CHECK_CONTAINS(err, "crashed with SIGSEGV");
  CHECK_EQ_INT(pp_profile_stack_count(p), 0);
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_restarts(w), 1);
  CHECK(logged("plugin tp_crash: worker crashed with SIGSEGV; restarting in 1 s"));
  /* During the backoff requests are refused with the reason. */
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -EAGAIN);
  CHECK_CONTAINS(err, "crashed with SIGSEGV; restarting in");
  CHECK_EQ_INT(pp_worker_add_targets(w, &t, 1, err, sizeof(err)), -EAGAIN);

  double t0 = now_s();
  CHECK(service_until_running(w, 3.0));
  double waited = now_s() - t0;
  CHECK(waited > 0.8 && waited < 2.5);
  CHECK(pp_worker_pid(w) != first);
  /* The restarted worker got init, start and the target replayed. */
  snapshot(w, p, &rc, err);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 1);
  const struct pp_stack_rec *st = pp_profile_stack(p, 0);
  if (st) {
    CHECK_EQ_INT(st->pid, getpid());
    CHECK_EQ_STR(frame_name(p, st, 0), "tp_crash_alive");
  }
  CHECK_EQ_INT(pp_worker_restarts(w), 1);
  pp_worker_free(w);
  unlink(once);

  fprintf(stderr, "== crash in init, every time\n");
  struct cfg c2 = {.pc = {.name = "tp_crash", .enabled = true}};
  c2.pc.options = c2.opts;
  bind(&c2, info, "crash_on", "init");
  w = make("tp_crash", false, 0, &c2);
  rc = pp_worker_start(w, &s, err, sizeof(err));
  CHECK_EQ_INT(rc, -ECHILD);
  CHECK_CONTAINS(err, "crashed with SIGSEGV");
  /* It keeps failing on restart; the backoff doubles (1 s, then 2 s). */
  for (int i = 0; i < 125 && pp_worker_restarts(w) < 2; i++) {
    pp_worker_service(w);
    usleep(20000);
  }
  CHECK_EQ_INT(pp_worker_restarts(w), 2);
  CHECK(logged("restarting in 2 s"));
  CHECK_EQ_INT(pp_worker_stop(w), 0); /* cancels the pending restart */
  pp_worker_service(w);
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -ENOTCONN);
  pp_worker_free(w);

  fprintf(stderr, "== init refuses politely\n");
  struct cfg c3 = {.pc = {.name = "tp_crash", .enabled = true}};
  c3.pc.options = c3.opts;
  bind(&c3, info, "crash_on", "refuse_init");
  w = make("tp_crash", false, 0, &c3);
  rc = pp_worker_start(w, &s, err, sizeof(err));
  CHECK_EQ_INT(rc, -ENOENT);
  CHECK_EQ_STR(err, "init failed: no runtime here");
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_stop(w), 0);
  pp_worker_service(w);
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -ENOTCONN);
  pp_worker_free(w);
  pp_profile_free(p);
}

/* Bytes in a file (the refusals tp_refuse counted), 0 if missing. */
static long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

static void clear_log(void) {
  pthread_mutex_lock(&log_mu);
  nlog = 0;
  memset(logbuf, 0, sizeof(logbuf));
  pthread_mutex_unlock(&log_mu);
}

/* A plugin whose start() (or init()) fails with PP_PERMANENT(): logged once,
 * never restarted, every request answers with the code and the reason; a
 * new worker (what a configuration reload builds) tries again. A plain
 * error from the same plugin is restarted with backoff, as before. */
static void test_permanent(bool inline_mode) {
  fprintf(stderr, "== permanent refusal (%s)\n", inline_mode ? "inline" : "process");
  const struct pp_plugin_info *info = plugin("tp_refuse");
  char count[256];
  worker_file("tp_refuse", "pp_test_refuse", count, sizeof(count));
  struct cfg c = {.pc = {.name = "tp_refuse", .enabled = true}};
  c.pc.options = c.opts;
  bind(&c, info, "count_file", count);
  clear_log();
  struct pp_worker *w = make("tp_refuse", inline_mode, 0, &c);
  char err[256];
  struct pp_session s = session();
  int rc = pp_worker_start(w, &s, err, sizeof(err));
  CHECK(PP_IS_PERMANENT(rc));
  CHECK_EQ_INT(PP_PERMANENT_ERRNO(rc), EACCES);
  CHECK_CONTAINS(err, "start failed: tp_refuse: the host refuses (start)");
  CHECK(pp_worker_off(w));
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_pid(w), 0);
  /* Longer than the first backoff (1 s): no restart happens. */
  double end = now_s() + 2.5;
  while (now_s() < end) {
    pp_worker_service(w);
    usleep(20000);
  }
  CHECK_EQ_INT(file_size(count), 1);
  CHECK_EQ_INT(logged_count("not restarted: it stays off until the configuration is reloaded"), 1);
  CHECK_EQ_INT(logged_count("the host refuses (start)"), 2); /* the plugin's line + the verdict */
  CHECK_EQ_INT(logged_count("restarting"), 0);
  CHECK_EQ_INT(pp_worker_restarts(w), 1);
  /* Requests answer with the code and the reason, without a new try. */
  rc = pp_worker_snapshot_begin(w, err, sizeof(err));
  CHECK(PP_IS_PERMANENT(rc));
  CHECK_CONTAINS(err, "the host refuses (start)");
  struct pp_target t = {.pid = (uint32_t)getpid()};
  CHECK(PP_IS_PERMANENT(pp_worker_add_targets(w, &t, 1, err, sizeof(err))));
  CHECK(PP_IS_PERMANENT(pp_worker_start(w, &s, err, sizeof(err))));
  CHECK_EQ_INT(file_size(count), 1);
  CHECK_EQ_INT(pp_worker_stop(w), 0);
  pp_worker_free(w);

  /* A reload builds a new worker: it is tried again (once). */
  w = make("tp_refuse", inline_mode, 0, &c);
  CHECK(PP_IS_PERMANENT(pp_worker_start(w, &s, err, sizeof(err))));
  CHECK_EQ_INT(file_size(count), 2);
  pp_worker_free(w);
  unlink(count);
  if (inline_mode) return;

  fprintf(stderr, "== permanent refusal in init\n");
  struct cfg c2 = {.pc = {.name = "tp_refuse", .enabled = true}};
  c2.pc.options = c2.opts;
  bind(&c2, info, "refuse_in", "init");
  bind(&c2, info, "count_file", count);
  w = make("tp_refuse", false, 0, &c2);
  rc = pp_worker_start(w, &s, err, sizeof(err));
  CHECK(PP_IS_PERMANENT(rc));
  CHECK_CONTAINS(err, "init failed: tp_refuse: the host refuses (init)");
  CHECK(pp_worker_off(w));
  end = now_s() + 1.5;
  while (now_s() < end) {
    pp_worker_service(w);
    usleep(20000);
  }
  CHECK_EQ_INT(file_size(count), 1);
  pp_worker_free(w);
  unlink(count);

  fprintf(stderr, "== the same refusal as an ordinary error is retried\n");
  struct cfg c3 = {.pc = {.name = "tp_refuse", .enabled = true}};
  c3.pc.options = c3.opts;
  bind(&c3, info, "permanent", "false");
  bind(&c3, info, "count_file", count);
  w = make("tp_refuse", false, 0, &c3);
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), -EACCES);
  CHECK(!pp_worker_off(w));
  end = now_s() + 2.5;
  while (now_s() < end && file_size(count) < 2) {
    pp_worker_service(w);
    usleep(20000);
  }
  CHECK(file_size(count) >= 2);
  CHECK(logged("the host refuses (start): set tp_refuse.refuse_in: never; restarting in 1 s"));
  pp_worker_stop(w);
  pp_worker_free(w);
  unlink(count);
}

static void test_hang(bool inline_mode) {
  fprintf(stderr, "== hang in snapshot (%s)\n", inline_mode ? "inline" : "process");
  struct pp_worker *w = make_t("tp_hang", inline_mode, 0, NULL, 1);
  char err[256];
  struct pp_session s = session();
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  pid_t pid = pp_worker_pid(w);
  struct pp_profile *p = pp_profile_new();
  int rc;
  double t0 = now_s();
  snapshot(w, p, &rc, err);
  double took = now_s() - t0;
  CHECK_EQ_INT(rc, -ETIMEDOUT);
  CHECK_CONTAINS(err, "did not answer SNAPSHOT within 1 s");
  CHECK(took >= 0.9 && took < 2.5);
  CHECK(!pp_worker_running(w));
  if (!inline_mode) {
    CHECK(kill(pid, 0) < 0 && errno == ESRCH); /* killed and reaped */
    CHECK(service_until_running(w, 3.0));      /* and restarted */
  } else {
    /* The stuck thread cannot be killed: abandoned, never restarted. */
    CHECK(!service_until_running(w, 1.5));
    CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -EIO);
    CHECK_CONTAINS(err, "did not answer");
    CHECK(logged("inline mode cannot restart it"));
  }
  pp_worker_free(w);
  pp_profile_free(p);
}

static void test_leak(void) {
  fprintf(stderr, "== leak past the memory limit\n");
  /* Measure a worker's own size first: a forked child starts with this
   * process's resident pages (large under ASan). */
  struct pp_worker *w = make("tp_minimal", false, 0, NULL);
  char err[256];
  struct pp_session s = session();
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  uint64_t base_kb = 0;
  pp_proc_rss_kb((uint32_t)pp_worker_pid(w), &base_kb);
  pp_worker_free(w);
  int limit = (int)(base_kb / 1024) + 64;

  w = make("tp_leak", false, limit, NULL);
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  double end = now_s() + 10;
  while (pp_worker_running(w) && now_s() < end) {
    pp_worker_service(w);
    usleep(10000);
  }
  CHECK(!pp_worker_running(w));
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), -EAGAIN);
  char want[64];
  snprintf(want, sizeof(want), "exceeded its memory limit of %d MiB", limit);
  CHECK_CONTAINS(err, want);
  pp_worker_free(w);
}

/* ---- host services, called directly (no worker) ---- */

static char host_line[512];
static int host_level = -1;
static void host_log_sink(void *ctx, int level, const char *text) {
  host_level = level;
  snprintf(host_line, sizeof(host_line), "%s", text);
}

static void test_host_direct(void) {
  fprintf(stderr, "== host services\n");
  const struct pp_plugin_info *info = plugin("tp_ok");
  struct cfg c = {.pc = {.name = "tp_ok", .enabled = true}};
  c.pc.options = c.opts;
  bind(&c, info, "depth", "7");
  bind(&c, info, "greeting", NULL); /* bound but unset: the default stays */
  struct pp_host_config hc;
  CHECK_EQ_INT(pp_host_config_build(&hc, &info->desc, &c.pc), 0);
  struct pp_host h;
  struct pp_host_ctx ctx;
  pp_host_init(&h, &ctx, &hc, host_log_sink, NULL);
  CHECK_EQ_INT(h.struct_size, sizeof(h));
  CHECK(PP_HOST_HAS(&h, scratch_dir));

  const char *str;
  int64_t i64;
  int b;
  const char *const *items;
  size_t n;
  CHECK_EQ_INT(h.config_string(&h, "greeting", &str), 0);
  CHECK_EQ_STR(str, "hello");
  CHECK_EQ_INT(h.config_int(&h, "greeting", &i64), -EINVAL); /* wrong type */
  CHECK_EQ_INT(h.config_int(&h, "depth", &i64), 0);
  CHECK_EQ_INT(i64, 7);
  CHECK_EQ_INT(h.config_bool(&h, "loud", &b), 0);
  CHECK_EQ_INT(b, 0);
  CHECK_EQ_INT(h.config_bool(&h, "enabled", &b), 0);
  CHECK_EQ_INT(b, 1);
  CHECK_EQ_INT(h.config_list(&h, "tags", &items, &n), 0);
  CHECK(n == 2 && items[2] == NULL);
  if (n == 2) CHECK_EQ_STR(items[1], "b");
  CHECK_EQ_INT(h.config_string(&h, "mode", &str), 0);
  CHECK_EQ_STR(str, "fast");
  CHECK_EQ_INT(h.config_string(&h, "nope", &str), -ENOENT);
  CHECK_EQ_INT(h.config_list(&h, "greeting", &items, &n), -EINVAL);
  CHECK(h.monotonic_ns(&h) > 0 && h.realtime_ns(&h) > 1600000000ull * 1000000000ull);
  const char *dir = h.scratch_dir(&h);
  CHECK(dir != NULL);
  if (dir) CHECK_CONTAINS(dir, "/tp_ok");
  char comm[32];
  CHECK_EQ_INT(h.proc_comm(&h, (uint32_t)getpid(), comm, sizeof(comm)), 0);
  CHECK_EQ_INT(h.proc_comm(&h, 0x7ffffff0u, comm, sizeof(comm)), -ESRCH);

  /* One log line stays one line. */
  h.log(&h, PP_LOG_WARNING, "two\nlines %d", 2);
  CHECK_EQ_STR(host_line, "two lines 2");
  CHECK_EQ_INT(host_level, PP_LOG_WARNING);
  char problem[64];
  pp_host_last_problem(&ctx, problem, sizeof(problem));
  CHECK_EQ_STR(problem, "two lines 2");

  struct pp_profile *p = pp_profile_new();
  struct pp_sink *sink = calloc(1, sizeof(*sink));
  pp_sink_begin(sink, p, &h);
  struct pp_frame f[2] = {{"leaf", NULL, 0, PP_FRAME_NATIVE}, {"root", NULL, 0, PP_FRAME_NATIVE}};
  struct pp_sample smp = {.pid = 5, .frames = f, .nframes = 2, .count = 1};
  CHECK_EQ_INT(h.emit(sink, &smp), 0);
  smp.pid = 0; /* the idle task ("swapper") is a real pid for perf */
  CHECK_EQ_INT(h.emit(sink, &smp), 0);
  CHECK_EQ_INT(h.set_appid(sink, 0, "idle"), -EINVAL);
  smp.pid = 5;
  smp.frames = NULL;
  CHECK_EQ_INT(h.emit(sink, &smp), -EINVAL);
  smp.frames = f;
  f[1].kind = PP_FRAME_KIND_COUNT; /* from a plugin of a later minor: shown as native */
  CHECK_EQ_INT(h.emit(sink, &smp), 0);
  CHECK_CONTAINS(host_line, "is newer than this agent");
  f[1].kind = 64; /* beyond any later minor: garbage */
  CHECK_EQ_INT(h.emit(sink, &smp), -EINVAL);
  f[1].kind = PP_FRAME_KERNEL;
  CHECK_EQ_INT(h.emit(NULL, &smp), -EINVAL);
  smp.count = 0;
  CHECK_EQ_INT(h.emit(sink, &smp), 0); /* nothing to add */
  smp.count = 1;
  /* Too deep: the root side goes, the leaf stays. Long names are cut. */
  struct pp_frame *deep = calloc(PP_MAX_FRAMES + 10, sizeof(*deep));
  char *longname = malloc(20001);
  memset(longname, 'x', 20000);
  longname[20000] = 0;
  for (int k = 0; k < PP_MAX_FRAMES + 10; k++)
    deep[k] = (struct pp_frame){"mid", NULL, 0, 0};
  deep[0].name = longname;
  deep[PP_MAX_FRAMES + 9].name = "lost_root";
  struct pp_sample ds = {.pid = 6, .frames = deep, .nframes = PP_MAX_FRAMES + 10, .count = 1};
  CHECK_EQ_INT(h.emit(sink, &ds), 0);
  CHECK_EQ_INT(h.set_appid(sink, 5, "my-app"), 0);
  CHECK_EQ_INT(h.set_app_metadata(sink, 5, "not json"), -EINVAL);
  CHECK_EQ_INT(h.set_app_metadata(sink, 5, "[1]"), -EINVAL);
  CHECK_EQ_INT(h.set_app_metadata(sink, 5, "{\"a\":1}"), 0);
  CHECK_EQ_INT(h.set_app_metadata(sink, 5, "{\"a\":2,\"b\":true}"), 0);
  CHECK_EQ_INT(h.set_pid_status(sink, 5, 7, "x"), -EINVAL);
  CHECK_EQ_INT(h.set_pid_status(sink, 7, PP_PID_SKIPPED, "not mine"), 0);
  CHECK_EQ_INT(h.add_counter(sink, "", 1), -EINVAL);
  CHECK_EQ_INT(h.add_counter(sink, "reads", 2), 0);
  CHECK_EQ_INT(h.add_counter(sink, "reads", 3), 0);
  pp_sink_end(sink);
  CHECK_EQ_INT(h.emit(sink, &smp), -EINVAL); /* only inside snapshot() */

  CHECK_EQ_INT(pp_profile_stack_count(p), 3);
  CHECK(pp_profile_pid(p, 0) != NULL);
  const struct pp_stack_rec *st = pp_profile_stack(p, 2);
  if (st) {
    CHECK_EQ_INT(st->nframes, PP_MAX_FRAMES);
    const char *leaf = frame_name(p, st, st->nframes - 1);
    CHECK_EQ_INT(strlen(leaf), PP_HOST_MAX_FRAME_STR);
    CHECK_EQ_STR(frame_name(p, st, 0), "mid");
  }
  struct pp_pid_rec *r = pp_profile_pid(p, 5);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_STR(pp_profile_str(p, r->appid), "my-app");
    CHECK_EQ_STR(pp_profile_str(p, r->app_meta), "{\"a\":2,\"b\":true}");
  }
  r = pp_profile_pid(p, 7);
  CHECK(r && r->status == PP_PID_SKIPPED);
  CHECK_EQ_INT(counter(p, "reads"), 5);
  CHECK_EQ_INT(counter(p, "invalid_samples"), 7); /* the refusals above, sink open */
  free(deep);
  free(longname);
  free(sink);
  pp_profile_free(p);
  pp_host_fini(&ctx);
  pp_host_config_free(&hc);
}

/* A profile far bigger than the socket buffer, collected long after the
 * worker answered: not a hang. */
static void test_big_late(void) {
  fprintf(stderr, "== big profile, collected late\n");
  const struct pp_plugin_info *info = plugin("tp_ok");
  struct cfg c = {.pc = {.name = "tp_ok", .enabled = true}};
  c.pc.options = c.opts;
  /* ~10 MB encoded but cheap to produce (long names, few stacks), so the
   * worker answers well within the timeout even on a loaded machine. */
  bind(&c, info, "extra_stacks", "2500");
  bind(&c, info, "extra_name_len", "4000");
  struct pp_worker *w = make_t("tp_ok", false, 0, &c, 1);
  char err[256];
  struct pp_session s = session();
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
  struct pp_target t = {.pid = (uint32_t)getpid()};
  CHECK_EQ_INT(pp_worker_add_targets(w, &t, 1, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_worker_snapshot_begin(w, err, sizeof(err)), 0);
  /* The core is busy elsewhere and collects only well after the timeout.
   * Wait (without reading) until the worker has finished snapshot(): its
   * once-per-snapshot warning about the bad sample is the first thing it
   * sends, right before the PROFILE. Then let the deadline pass. */
  struct pollfd pfd = {.fd = pp_worker_fd(w), .events = POLLIN};
  CHECK_EQ_INT(poll(&pfd, 1, 20000), 1);
  usleep(1500000);
  struct pp_profile *p = pp_profile_new();
  int rc = pp_worker_snapshot_end(w, p, err, sizeof(err));
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "end: %s\n", err);
  CHECK_EQ_INT(pp_profile_stack_count(p), 2501);
  CHECK_EQ_INT(pp_worker_restarts(w), 0);
  pp_profile_free(p);
  pp_worker_free(w);
}

/* The plugin damages the protocol or its process in various ways. */
static void test_evil(void) {
  static const struct {
    const char *mode, *reason;
    int rc;
  } cases[] = {
      {"garbage", "broke the protocol", -EPROTO},
      {"bogus", "broke the protocol: unexpected REPLY", -EPROTO},
      {"close", "closed its connection", -ECHILD},
      {"exit", "exited with status 3", -ECHILD},
      {"abort", "crashed with SIGABRT", -ECHILD},
  };
  const struct pp_plugin_info *info = plugin("tp_evil");
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    fprintf(stderr, "== evil: %s\n", cases[i].mode);
    struct cfg c = {.pc = {.name = "tp_evil", .enabled = true}};
    c.pc.options = c.opts;
    bind(&c, info, "evil", (char *)cases[i].mode);
    struct pp_worker *w = make("tp_evil", false, 0, &c);
    char err[256];
    struct pp_session s = session();
    CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), 0);
    pid_t pid = pp_worker_pid(w);
    struct pp_profile *p = pp_profile_new();
    int rc;
    double t0 = now_s();
    snapshot(w, p, &rc, err);
    CHECK_EQ_INT(rc, cases[i].rc);
    CHECK_CONTAINS(err, cases[i].reason);
    /* bounds leave room for a loaded CI machine; the point is "not hung" */
    CHECK(now_s() - t0 < 6.0);
    CHECK(!pp_worker_running(w));
    /* gone for good: reaped, not even a zombie, within a moment */
    bool gone = false;
    for (int k = 0; k < 200 && !gone; k++) {
      gone = kill(pid, 0) < 0 && errno == ESRCH;
      if (!gone) usleep(10000);
    }
    CHECK(gone);
    CHECK_EQ_INT(pp_profile_stack_count(p), 0);
    pp_profile_free(p);
    pp_worker_free(w);
  }
}

/* A missing worker executable is a broken install: one clear error naming
 * the path, no restart loop. */
static void test_missing_exe(void) {
  fprintf(stderr, "== missing worker executable\n");
  const char *paths[] = {"/nonexistent/polyprof-worker", "polyprof-worker"};
  const char *want[] = {"/nonexistent/polyprof-worker: No such file or directory",
                        "polyprof-worker: not an absolute path"};
  for (int i = 0; i < 2; i++) {
    struct pp_worker_opts o = {.timeout_s = 5, .backoff_max_s = 2, .worker_path = paths[i]};
    struct pp_worker *w = pp_worker_new(plugin("tp_ok"), NULL, &o);
    CHECK(w != NULL);
    if (!w) return;
    char err[512] = "";
    struct pp_session s = session();
    int rc = pp_worker_start(w, &s, err, sizeof(err));
    CHECK(PP_IS_PERMANENT(rc));
    CHECK_CONTAINS(err, want[i]);
    CHECK(pp_worker_off(w));
    CHECK(logged(want[i]));
    pp_worker_free(w);
  }
}

static void test_init_hang(void) {
  fprintf(stderr, "== hang in init\n");
  const struct pp_plugin_info *info = plugin("tp_hang");
  struct cfg c = {.pc = {.name = "tp_hang", .enabled = true}};
  c.pc.options = c.opts;
  bind(&c, info, "hang_on", "init");
  struct pp_worker *w = make_t("tp_hang", false, 0, &c, 1);
  char err[256];
  struct pp_session s = session();
  double t0 = now_s();
  CHECK_EQ_INT(pp_worker_start(w, &s, err, sizeof(err)), -ETIMEDOUT);
  CHECK_CONTAINS(err, "did not answer INIT within 1 s");
  CHECK(now_s() - t0 < 5.0); /* 1 s timeout + a loaded machine */
  pp_worker_free(w);
}

int main(void) {
  const char *build = getenv("PP_BUILD_DIR");
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/tests/plugins", build ? build : "build");
  char exe[4096];
  snprintf(exe, sizeof(exe), "%s/polyprof-worker", build ? build : "build");
  if (!realpath(exe, worker_exe)) { /* plugins.worker_path must be absolute */
    fprintf(stderr, "no worker executable at %s\n", exe);
    return 1;
  }
  pp_log_set_forward(capture, NULL);
  if (pp_registry_scan(dir, &infos, &ninfos) != 0) {
    fprintf(stderr, "cannot scan %s\n", dir);
    return 1;
  }
  double t0 = now_s();
  test_host_direct();
  test_ok(false);
  test_minimal();
  test_crash();
  test_permanent(false);
  test_hang(false);
  test_leak();
  test_big_late();
  test_evil();
  test_init_hang();
  test_missing_exe();
  /* Inline last: the abandoned hung thread stays until we exit. */
  test_ok(true);
  test_permanent(true);
  test_hang(true);
  fprintf(stderr, "total %.1f s\n", now_s() - t0);
  pp_registry_free(infos, ninfos);
  return pp_test_finish("test_worker");
}
